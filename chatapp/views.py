from collections.abc import AsyncIterator, Iterator

from asgiref.sync import sync_to_async
from django import forms
from django.conf import settings
from django.contrib import messages
from django.contrib.auth import login, logout
from django.contrib.auth.decorators import login_required
from django.core.handlers.asgi import ASGIRequest
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.shortcuts import redirect, render
from django.template import loader
from django.urls import reverse_lazy
from django.utils import timezone
from django.views import defaults
from django.views.decorators.http import require_http_methods
from django.views.generic import CreateView

from access_app import selectors as access_selectors
from access_app.forms import SignupForm, TokenForm
from access_app.signin import password_confirm
from agents_app import selectors as agents_selectors
from agents_app import services as agents_services
from agents_app.app_policy import apps_redaction_of
from chatapp import selectors as chat_selectors
from chatapp import services as chat_services
from core.rate_limits import client_address, window_count_exceeded
from memory_app import selectors as memory_selectors
from memory_app import services as memory_services

SIGNUP_WINDOW_SECONDS = 3600


class SignupView(CreateView):
    """Create an account and sign the new user in straight away.

    At most ``SIGNUP_PER_ADDRESS_PER_HOUR`` accounts per client address and hour (a refused
    sign-up answers 429 and creates nothing), and no name that looks like an existing one.
    """

    form_class = SignupForm
    template_name = "registration/signup.html"
    success_url = reverse_lazy("home")

    def dispatch(self, request, *args, **kwargs):
        if request.user.is_authenticated:
            return redirect("home")
        return super().dispatch(request, *args, **kwargs)

    def form_valid(self, form):
        if window_count_exceeded(
            key=f"signup:{client_address(self.request)}",
            limit=settings.SIGNUP_PER_ADDRESS_PER_HOUR,
            window_seconds=SIGNUP_WINDOW_SECONDS,
        ):
            form.add_error(
                None,
                "Too many accounts were created from your address in the last hour. "
                "Try again later.",
            )
            return self.render_to_response(self.get_context_data(form=form), status=429)
        response = super().form_valid(form)
        login(self.request, self.object, backend="django.contrib.auth.backends.ModelBackend")
        return response


@login_required
@require_http_methods(["GET", "POST"])
def settings_page(request: HttpRequest) -> HttpResponse:
    """Memory on/off switches (saved at once), the proposals to let an app act for the user
    waiting for their answer, and the user's data rights: export, delete."""
    if request.method == "POST" and "link_proposal" in request.POST:
        return _link_decide(request)
    if request.method == "POST":
        memory_services.memory_settings_update(
            user_pk=request.user.pk,
            create_enabled=request.POST.get("create_enabled") == "on",
            use_enabled=request.POST.get("use_enabled") == "on",
            past_chats_enabled=request.POST.get("past_chats_enabled") == "on",
        )
        messages.success(request, "Memory settings saved. They apply from the next reply.")
        return redirect("settings")
    context = {
        "memory_settings": memory_selectors.memory_settings_get(user_pk=request.user.pk),
        "tokens": access_selectors.access_tokens_of(user=request.user),
        "token_form": TokenForm(),
        "mcp_url": request.build_absolute_uri("/mcp/"),
        "link_proposals": agents_selectors.end_user_proposals_waiting(user=request.user),
        "app_redactions": apps_redaction_of(user=request.user),
    }
    return render(request, "account/settings.html", context)


def _link_decide(request: HttpRequest) -> HttpResponse:
    """The person's answer to a proposal to let an app act for them; another's proposal, or
    one already answered, is unknown (404)."""
    try:
        proposal_id = int(request.POST.get("link_proposal", ""))
    except ValueError:
        raise Http404("No such proposal.") from None
    decision = request.POST.get("decision")
    if decision not in ("approve", "decline"):
        messages.error(request, "Choose to approve or decline.")
        return redirect("settings")
    try:
        proposal = agents_services.end_user_link_decide(
            user=request.user, proposal_id=proposal_id, approve=decision == "approve"
        )
    except agents_services.AppError as error:
        messages.error(request, str(error))
        return redirect("settings")
    if proposal is None:
        raise Http404("No such proposal.")
    if decision == "approve":
        messages.success(
            request,
            f"Approved: the app {proposal.app.name} may now act for you as its user "
            f"{proposal.external_id!r}. Each use shows in your access log.",
        )
    else:
        messages.success(request, f"Declined: the app {proposal.app.name} cannot act for you.")
    return redirect("settings")


def export_response(request: HttpRequest, *, user=None) -> StreamingHttpResponse:
    """The data of ``user`` (the request's by default) as a JSON attachment, streamed as it
    is read.

    Under ASGI each piece is read in the request's database thread through ``sync_to_async``:
    Django would otherwise read a synchronous iterator to the end before sending any of it.
    """
    pieces = chat_selectors.user_data_export(user=user or request.user)
    if isinstance(request, ASGIRequest):
        pieces = _async_pieces(pieces)
    response = StreamingHttpResponse(pieces, content_type="application/json; charset=utf-8")
    stamp = timezone.now().strftime("%Y-%m-%d")
    response["Content-Disposition"] = f'attachment; filename="my-data-{stamp}.json"'
    response["Cache-Control"] = "no-store"
    return response


async def _async_pieces(pieces: Iterator[str]) -> AsyncIterator[str]:
    take = sync_to_async(lambda: next(pieces, None))
    while (piece := await take()) is not None:
        yield piece


@login_required
@require_http_methods(["GET"])
def data_export(request: HttpRequest) -> StreamingHttpResponse:
    return export_response(request)


class DataDeleteForm(forms.Form):
    password = forms.CharField(
        widget=forms.PasswordInput(attrs={"autocomplete": "current-password"}),
        help_text="Your password, to confirm it is you.",
    )
    delete_account = forms.BooleanField(
        required=False,
        label="Also delete my account",
        help_text="Without it, you stay signed in with an empty history and your memory "
        "settings kept.",
    )

    def __init__(self, *args, user, request, **kwargs):
        super().__init__(*args, **kwargs)
        self.user = user
        self.request = request

    def clean_password(self) -> str:
        password = self.cleaned_data["password"]
        refusal = password_confirm(request=self.request, user=self.user, password=password)
        if refusal:
            raise forms.ValidationError(refusal)
        return password


@login_required
@require_http_methods(["GET", "POST"])
def data_delete(request: HttpRequest) -> HttpResponse:
    """Delete all my data, after the user's password; the account too if they ask."""
    form = DataDeleteForm(request.POST or None, user=request.user, request=request)
    if request.method == "POST" and form.is_valid():
        delete_account = form.cleaned_data["delete_account"]
        chat_services.user_data_delete(user=request.user, delete_account=delete_account)
        if delete_account:
            logout(request)
            messages.success(request, "Your account and all its data were deleted.")
            return redirect("login")
        messages.success(request, "All your chats, memories and state were deleted.")
        return redirect("settings")
    status = 400 if form.is_bound else 200
    return render(request, "account/delete.html", {"form": form}, status=status)


def _api_request(request: HttpRequest) -> bool:
    return request.path.startswith("/api/")


def page_not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    """404 for a URL no route matches and for an object the visitor does not have: JSON under
    ``/api/`` (as the API's own 404s), the site's page elsewhere. An id of the wrong shape in an
    API URL (``/api/x/abc/`` where a number goes) lands here, and an API client must still get
    JSON."""
    if _api_request(request):
        return JsonResponse({"detail": "Not found."}, status=404)
    return defaults.page_not_found(request, exception)


def server_error(request: HttpRequest) -> HttpResponse:
    """500: JSON under ``/api/``, the site's page elsewhere.

    The page is rendered without the request's context: whatever failed (the database, a
    context processor) must not fail the error page too, so it names no user."""
    if _api_request(request):
        detail = "Something went wrong on our side. Please try again."
        return JsonResponse({"detail": detail, "code": "server_error"}, status=500)
    return HttpResponse(loader.get_template("500.html").render(), status=500)
