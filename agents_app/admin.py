"""Apps, their service accounts and keys, their end users and the audit of the service API, in
the staff console.

An app's agent (instruction, model provider and model, tools, output key, compaction, memory
preload and tools, triggers, PII redaction) and who may use it are edited here; the agent reads
its app at the start of every turn, so a change applies from the next turn. "Test connection"
sends its model one short request and shows the answer or the error. Its ``app:`` state is edited in
the session store's console (``sessions_app.admin``, ``sessions_app.change_app_state``,
audited), linked from the app's page. Service accounts and keys are the Key managers' (Memory
admins see them): a key is shown once, on the page that created it, and is stored hashed; keys
are revoked, never edited or deleted, so a key's scopes are those it was issued with; each
account made or changed and each key issued or revoked is in the staff access log.
"""

from __future__ import annotations

from datetime import timedelta

from django import forms
from django.conf import settings
from django.contrib import admin, messages
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.safestring import mark_safe
from rest_framework_api_key.models import APIKey

from agents_app.models import (
    ALL_SCOPES,
    App,
    EndUser,
    EndUserLinkProposal,
    Scope,
    ServiceAccount,
    ServiceAccountKey,
)
from agents_app.models import ServiceRequest as ServiceRequestRecord
from agents_app.runtime.agents import agent_from_app
from agents_app.runtime.models import model_connection_test, model_label
from agents_app.runtime.tools import BUILTIN_TOOLS
from agents_app.selectors import app_model_usage
from agents_app.services import (
    AppError,
    app_tool_traits_keep,
    end_user_link_problem,
    end_user_link_propose,
    service_account_change,
    service_account_create,
    service_key_create,
    service_key_expiry_validate,
    service_key_revoke,
)
from core.admin import ReadOnlyAdmin
from core.llm import ModelError
from memory_app.embedding import embedder_get
from memory_app.models import MemoryTopic
from memory_app.safety.guard import memory_write_guard
from memory_app.services.app_memories import app_memories, app_memory_create
from sessions_app.models import AppState, BackgroundModelCall
from sessions_app.selectors.model_calls import ModelUsage, background_usage

# The days of model usage the console shows an app's.
USAGE_DAYS = 30


def _calls(count: int) -> str:
    return f"{count:,} model call{'s' if count != 1 else ''}"


def _usage_words(usage: ModelUsage) -> str:
    """Model calls in words: their tokens, and how many came with none reported."""
    reported = usage.calls - usage.unreported
    if not reported:
        return f"{_calls(usage.calls)}, tokens not reported by the server"
    words = (
        f"{usage.prompt_tokens:,} prompt + {usage.completion_tokens:,} completion tokens "
        f"in {_calls(reported)}"
    )
    if usage.unreported:
        words += f"; {usage.unreported:,} more, tokens not reported by the server"
    return words


# djangorestframework-api-key's own model is not used: keys are ServiceAccountKey rows.
if admin.site.is_registered(APIKey):
    admin.site.unregister(APIKey)


class AppForm(forms.ModelForm):
    tools = forms.MultipleChoiceField(
        choices=[(name, name) for name in sorted(BUILTIN_TOOLS)],
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text="Built-in tools the agent may call (the memory tools are set below).",
    )

    class Meta:
        model = App
        fields = [
            field.name
            for field in App._meta.get_fields()
            if field.concrete and field.editable and not field.auto_created
        ]
        widgets = {"instruction": forms.Textarea(attrs={"rows": 8, "cols": 90})}

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        name = self.instance.name if self.instance.pk else ""
        for field, default in (
            ("trigger_every_turn", settings.MEMORY_TRIGGER_EVERY_TURN),
            ("trigger_explicit", settings.MEMORY_TRIGGER_EXPLICIT),
            ("pii_redaction", bool(settings.MEMORY_PII_REDACTION.get(name, False))),
        ):
            self.fields[field].widget.choices = [
                ("unknown", f"Use the default ({'on' if default else 'off'})"),
                ("true", "On"),
                ("false", "Off"),
            ]

    new_app_memory = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 3, "cols": 90}),
        max_length=2000,
        help_text="Add a shared memory every user's agent knows (bootstrapped: the highest "
        "trust): shared knowledge, or how the agent handles a recurring task. Curate existing "
        "ones under Memories (scope: app).",
    )

    def clean_new_app_memory(self) -> str:
        """The new shared memory, refused here with the write guard's reason rather than
        once the app is saved."""
        text = " ".join(self.cleaned_data.get("new_app_memory", "").split())
        verdict = memory_write_guard(text=text, procedural=True) if text else None
        if verdict is not None and not verdict.ok:
            raise forms.ValidationError(f"Not saved as a memory: {verdict.reason}.")
        return text


@admin.register(App)
class AppAdmin(admin.ModelAdmin):
    form = AppForm
    list_display = [
        "name",
        "title",
        "users",
        "answering_model",
        "usage_shown",
        "pii_redaction_shown",
        "updated_at",
    ]
    search_fields = ["name", "title"]
    filter_horizontal = ["allowed_groups"]
    actions = ["connection_test"]
    change_form_template = "admin/agents_app/app/change_form.html"
    fieldsets = [
        (None, {"fields": ["name", "title", "description"]}),
        ("Who may use it", {"fields": ["open_to_all", "allowed_groups"]}),
        (
            "Agent",
            {
                "fields": [
                    "agent_name",
                    "provider",
                    "model",
                    "instruction",
                    "tools",
                    "output_key",
                    "max_steps",
                    "preload_memories",
                    "memory_tools",
                ]
            },
        ),
        (
            "Context compaction",
            {
                "fields": [
                    "keep_last_invocations",
                    "token_budget",
                    "summarize_after_invocations",
                    "max_events_loaded",
                ]
            },
        ),
        (
            "Memory",
            {
                "fields": [
                    "trigger_every_n_turns",
                    "trigger_every_turn",
                    "trigger_session_idle_seconds",
                    "trigger_session_left_seconds",
                    "trigger_explicit",
                    "pii_redaction",
                    "memory_lifetime",
                    "memory_topics",
                    "shared_memories",
                    "new_app_memory",
                ]
            },
        ),
        ("App state", {"fields": ["app_state"]}),
        ("Model usage", {"fields": ["usage_shown"]}),
    ]
    readonly_fields = ["memory_topics", "shared_memories", "app_state", "usage_shown"]

    @admin.display(description="model")
    def answering_model(self, app: App) -> str:
        return model_label(agent_from_app(app))

    @admin.display(description=f"model usage ({USAGE_DAYS} days)")
    def usage_shown(self, app: App) -> str:
        """The tokens of the app's chat turns and of its background work over the last days,
        as its model's server counted them, so that staff see what an app costs or loads its
        server; calls whose server reported no counts are said to be, not counted as zero."""
        if app.pk is None:
            return "-"
        since = timezone.now() - timedelta(days=USAGE_DAYS)
        lines = [("Chat turns", app_model_usage(app_name=app.name, since=since))]
        background = background_usage(app_name=app.name, since=since)
        lines += [
            (BackgroundModelCall.Purpose(purpose).label, usage)
            for purpose, usage in background.items()
        ]
        if not any(usage.calls for _label, usage in lines):
            return "No model calls"
        return format_html_join(
            mark_safe("<br>"),
            "{}: {}",
            ((label, _usage_words(usage)) for label, usage in lines if usage.calls),
        )

    @admin.display(description="who may use it", ordering="open_to_all")
    def users(self, app: App) -> str:
        return "Every signed-in user" if app.open_to_all else "Members of its groups"

    @admin.display(description="PII redaction", ordering="pii_redaction")
    def pii_redaction_shown(self, app: App) -> str:
        """On or Off, or the default's value when the app keeps to it (an empty field)."""
        if app.pii_redaction is None:
            default = bool(settings.MEMORY_PII_REDACTION.get(app.name, False))
            return f"Default ({'on' if default else 'off'})"
        return "On" if app.pii_redaction else "Off"

    @admin.action(description="Test connection: send the model one short request")
    def connection_test(self, request, queryset) -> None:
        """The model's answer or error; for an OpenAI-compatible server also what it cannot
        do (tools, a streamed tool decision, pooled embeddings), each said once as a warning
        and the findings on tools kept on the app, which its chats then follow."""
        embedder = embedder_get()
        embedding_model = embedder.model if getattr(embedder, "provider", "") == "openai" else ""
        for app in queryset:
            agent = agent_from_app(app)
            try:
                report = model_connection_test(agent=agent, embedding_model=embedding_model)
            except ModelError as error:
                self.message_user(
                    request, f"{app.name}: {model_label(agent)} failed: {error}", messages.ERROR
                )
                continue
            self.message_user(
                request, f"{app.name}: {model_label(agent)} answered: {report.answer[:300]}"
            )
            if report.findings is None:
                continue
            app_tool_traits_keep(
                app_name=app.name,
                provider=agent.provider,
                model=agent.model,
                traits=report.findings.tool_traits(),
            )
            for warning in report.findings.warnings():
                self.message_user(request, f"{app.name}: {warning}", messages.WARNING)

    @admin.display(description="app: state")
    def app_state(self, app: App) -> str:
        count = AppState.objects.filter(app_name=app.name).count() if app.pk else 0
        return format_html(
            '{} keys (<a href="../../../sessions_app/appstate/?app_name={}">see and edit</a>)',
            count,
            app.name,
        )

    @admin.display(description="shared memories")
    def shared_memories(self, app: App) -> str:
        count = app_memories(app_name=app.name).count() if app.pk else 0
        return format_html(
            '{} (<a href="../../../memory_app/memory/?app_name={}&scope__exact=app">see</a>)',
            count,
            app.name,
        )

    @admin.display(description="memory topics")
    def memory_topics(self, app: App) -> str:
        topics = MemoryTopic.objects.filter(app_name=app.name).order_by("key")
        names = ", ".join(topic.key for topic in topics) or "the managed topics only"
        return format_html(
            '{} (<a href="../../../memory_app/memorytopic/?app_name={}">edit</a>)', names, app.name
        )

    def get_readonly_fields(self, request, obj=None):
        fields = list(super().get_readonly_fields(request, obj))
        if obj is not None:
            fields.append("name")
        return fields

    def save_model(self, request, obj, form, change) -> None:
        super().save_model(request, obj, form, change)
        text = form.cleaned_data.get("new_app_memory", "").strip()
        if text and request.user.has_perm("memory_app.add_memory"):
            app_memory_create(
                app_name=obj.name,
                text=text,
                actor_user_pk=request.user.pk,
                reason="added in the staff console",
            )


class ServiceAccountForm(forms.ModelForm):
    scopes = forms.MultipleChoiceField(
        choices=Scope.choices,
        initial=ALL_SCOPES,
        widget=forms.CheckboxSelectMultiple,
        help_text="Scopes of the first key.",
    )
    expires_at = forms.DateTimeField(required=False, help_text="When the first key expires.")

    class Meta:
        model = ServiceAccount
        fields = ["app", "name", "description"]

    def clean_expires_at(self):
        expires_at = self.cleaned_data.get("expires_at")
        try:
            service_key_expiry_validate(expires_at=expires_at)
        except AppError as error:
            raise forms.ValidationError(str(error)) from None
        return expires_at


def scope_words(key: ServiceAccountKey) -> str:
    """What a key may do, in the words of its scopes (not their stored names)."""
    labels = dict(Scope.choices)
    return "; ".join(labels.get(scope, scope) for scope in key.scopes) or "Nothing"


def key_state(key: ServiceAccountKey) -> str:
    """Whether a key still works: "Active", "Revoked" or "Expired"."""
    if key.revoked:
        return "Revoked"
    if key.expiry_date and key.expiry_date <= timezone.now():
        return "Expired"
    return "Active"


class KeyInline(admin.TabularInline):
    model = ServiceAccountKey
    extra = 0
    fields = ["prefix", "name", "may", "created", "expiry_date", "last_used_at", "state"]
    readonly_fields = fields
    can_delete = False

    def has_add_permission(self, request, obj=None) -> bool:
        return False

    @admin.display(description="may")
    def may(self, key: ServiceAccountKey) -> str:
        return scope_words(key)

    @admin.display(description="state")
    def state(self, key: ServiceAccountKey) -> str:
        return key_state(key)


@admin.register(ServiceAccount)
class ServiceAccountAdmin(admin.ModelAdmin):
    """Making and changing service accounts and issuing their keys is the Key managers' (the
    ``agents_app`` add and change permissions); each goes through ``agents_app.services``,
    which writes it to the staff access log."""

    list_display = ["name", "app", "created_at", "active_keys"]
    list_filter = ["app"]
    search_fields = ["name", "app__name"]
    inlines = [KeyInline]
    actions = ["key_create"]

    def get_form(self, request, obj=None, change=False, **kwargs):
        if obj is None:
            kwargs["form"] = ServiceAccountForm
        return super().get_form(request, obj, change=change, **kwargs)

    def get_readonly_fields(self, request, obj=None):
        """An account's app is fixed once it is made: moving it would hand its keys another
        app's end users."""
        return ["app"] if obj is not None else []

    @admin.display(description="active keys")
    def active_keys(self, account: ServiceAccount) -> int:
        return account.keys.filter(revoked=False).count()

    def save_model(self, request, obj, form, change) -> None:
        if change:
            service_account_change(account=obj, actor=request.user, changed=form.changed_data)
            return
        issued = service_account_create(
            app=obj.app,
            name=obj.name,
            description=obj.description,
            scopes=form.cleaned_data["scopes"],
            expires_at=form.cleaned_data.get("expires_at"),
            actor=request.user,
        )
        account = issued.record.service_account
        obj.pk, obj.created_at = account.pk, account.created_at
        self._key_shown(request, issued.key)

    def has_delete_permission(self, request, obj=None) -> bool:
        """An account stays, with its revoked keys, as the record of who held an app's keys:
        revoking its keys is how it is shut out."""
        return False

    def has_key_create_permission(self, request) -> bool:
        return request.user.has_perm("agents_app.add_serviceaccountkey")

    @admin.action(description="Create a new key (every scope)", permissions=["key_create"])
    def key_create(self, request, queryset) -> None:
        for account in queryset:
            self._key_shown(
                request, service_key_create(service_account=account, actor=request.user).key
            )

    def _key_shown(self, request, key: str) -> None:
        messages.warning(request, f"The API key, shown this once (it is stored hashed): {key}")


@admin.register(ServiceAccountKey)
class ServiceAccountKeyAdmin(ReadOnlyAdmin):
    list_display = [
        "prefix",
        "service_account",
        "scope_list",
        "created",
        "expiry_date",
        "last_used_at",
        "state",
    ]
    list_filter = ["revoked", "service_account__app"]
    search_fields = ["prefix", "service_account__name"]
    fields = ["prefix", "name", *list_display[1:]]
    readonly_fields = fields
    actions = ["revoke"]

    @admin.display(description="may")
    def scope_list(self, key: ServiceAccountKey) -> str:
        return scope_words(key)

    @admin.display(description="state", ordering="revoked")
    def state(self, key: ServiceAccountKey) -> str:
        return key_state(key)

    def has_revoke_permission(self, request) -> bool:
        return request.user.has_perm("agents_app.change_serviceaccountkey")

    @admin.action(description="Revoke the selected keys", permissions=["revoke"])
    def revoke(self, request, queryset) -> None:
        for key in queryset.select_related("service_account__app"):
            service_key_revoke(key=key, actor=request.user)
        self.message_user(request, f"Revoked: {queryset.count()}.", messages.SUCCESS)


@admin.register(EndUser)
class EndUserAdmin(admin.ModelAdmin):
    """End users are made by their app's first write for them; staff never add, link or edit
    one: deleting their data goes through the service API or the account's own deletion."""

    list_display = ["external_id", "app", "user", "created_at"]
    list_filter = ["app"]
    search_fields = ["external_id", "user__username"]
    list_select_related = ["app", "user"]
    raw_id_fields = ["user"]

    def has_add_permission(self, request) -> bool:
        """No staff link a person's account to an app: it would hand the app's keys all of
        that person's data without their word (issue 43)."""
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


class LinkProposalForm(forms.ModelForm):
    class Meta:
        model = EndUserLinkProposal
        fields = ["app", "external_id", "user"]
        help_texts = {
            "external_id": "The person's id in the app (what its service account sends).",
            "user": "The person's own account. Nothing is linked until they approve it on "
            "their Settings page.",
        }


@admin.register(EndUserLinkProposal)
class EndUserLinkProposalAdmin(admin.ModelAdmin):
    """A superuser proposes to link a person's own account to an app's end user; the person
    approves or declines on their Settings page. No one edits a proposal or links directly."""

    form = LinkProposalForm
    list_display = ["app", "external_id", "user", "status", "proposed_by", "created_at"]
    list_filter = ["app", "status"]
    search_fields = ["external_id", "user__username"]
    list_select_related = ["app", "user", "proposed_by"]
    raw_id_fields = ["user"]

    def has_add_permission(self, request) -> bool:
        return request.user.is_active and request.user.is_superuser

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False

    def get_form(self, request, obj=None, change=False, **kwargs):
        base = super().get_form(request, obj, change=change, **kwargs)

        class Checked(base):
            def clean(self):
                data = super().clean()
                if not self.errors:
                    problem = end_user_link_problem(
                        app=data["app"],
                        external_id=data["external_id"],
                        user=data["user"],
                        proposed_by=request.user,
                    )
                    if problem:
                        raise forms.ValidationError(problem)
                return data

        return Checked

    def save_model(self, request, obj, form, change) -> None:
        """Made by the service, which logs the proposal in the person's access log."""
        proposal = end_user_link_propose(
            app=obj.app, external_id=obj.external_id, user=obj.user, proposed_by=request.user
        )
        obj.pk, obj.proposed_by, obj.created_at = proposal.pk, request.user, proposal.created_at


@admin.register(ServiceRequestRecord)
class ServiceRequestAdmin(ReadOnlyAdmin):
    list_display = ["created_at", "app_name", "service_account", "method", "route", "outcome"]
    list_filter = ["app_name", "status_code", "method"]
    search_fields = ["route", "key_prefix", "detail"]
    list_select_related = ["service_account"]

    @admin.display(description="outcome", ordering="status_code")
    def outcome(self, request_record: ServiceRequestRecord) -> str:
        detail = f": {request_record.detail}" if request_record.detail else ""
        return f"{request_record.status_code}{detail}"
