"""Forms of the access layer: a grant a user gives a staff account until a date, and sign-up."""

from __future__ import annotations

from datetime import date, datetime, time, timedelta

from django import forms
from django.contrib.auth.forms import AuthenticationForm, UserCreationForm
from django.utils import timezone

from access_app.models import AccessScope
from access_app.selectors import username_confusable_taken
from access_app.services import GRANT_MAX_DAYS
from access_app.signin import signin_tries_left, wrong_password_message


def end_of_day(day: date) -> datetime:
    """The first instant after ``day`` in the current time zone: a grant "until" a date
    covers that whole day."""
    return timezone.make_aware(datetime.combine(day + timedelta(days=1), time.min))


class GrantForm(forms.Form):
    grantee = forms.CharField(
        label="Staff username",
        max_length=150,
        help_text="The username support gave you. Only staff accounts can receive access.",
        widget=forms.TextInput(attrs={"autocomplete": "off", "spellcheck": "false"}),
    )
    scope = forms.ChoiceField(
        label="What they may read", choices=AccessScope.choices, initial=AccessScope.MEMORIES
    )
    until = forms.DateField(
        label="Until (inclusive)",
        help_text=f"Read-only access ends after this day; at most {GRANT_MAX_DAYS} days ahead.",
        widget=forms.DateInput(attrs={"type": "date"}),
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        today = timezone.localdate()
        self.fields["until"].initial = today + timedelta(days=7)
        self.fields["until"].widget.attrs.update(
            {
                "min": today.isoformat(),
                "max": (today + timedelta(days=GRANT_MAX_DAYS - 1)).isoformat(),
            }
        )

    def clean_until(self) -> date:
        """The day, refused past the longest grant here already: the end of a far day (the
        last one a date can hold) is no instant at all."""
        until = self.cleaned_data["until"]
        if until > timezone.localdate() + timedelta(days=GRANT_MAX_DAYS):
            raise forms.ValidationError(f"A grant lasts at most {GRANT_MAX_DAYS} days.")
        return until

    def expires_at(self) -> datetime:
        return end_of_day(self.cleaned_data["until"])


class SignupForm(UserCreationForm):
    """Django's sign-up form, refusing a name that looks like an existing account's."""

    def clean_username(self) -> str:
        username = super().clean_username()
        if username and username_confusable_taken(username):
            raise forms.ValidationError(
                "This name is taken or looks too much like an existing account's name "
                "(letters of other alphabets, digits for letters, case). Choose another.",
                code="confusable",
            )
        return username


class SignInForm(AuthenticationForm):
    """Django's sign-in form, whose wrong-password error says how many tries are left before
    the sign-in guard locks signing in, and for how long."""

    def get_invalid_login_error(self) -> forms.ValidationError:
        left = signin_tries_left(request=self.request, username=self.cleaned_data["username"])
        return forms.ValidationError(wrong_password_message(tries_left=left), code="invalid_login")


TOKEN_LIFETIMES = [("30", "30 days"), ("90", "90 days"), ("365", "A year"), ("", "Never")]


class TokenForm(forms.Form):
    """A personal access token to make: its name, whether it may change memories, its life."""

    name = forms.CharField(
        label="Name",
        max_length=50,
        help_text="To recognise it later, e.g. the assistant it is for.",
        widget=forms.TextInput(attrs={"autocomplete": "off"}),
    )
    write = forms.BooleanField(
        label="May also add, correct and delete memories", required=False, initial=False
    )
    expires = forms.ChoiceField(
        label="Expires after", choices=TOKEN_LIFETIMES, initial="90", required=False
    )

    def scopes(self) -> list[str]:
        return ["read", "write"] if self.cleaned_data["write"] else ["read"]

    def expires_in_days(self) -> int | None:
        return int(self.cleaned_data["expires"]) if self.cleaned_data["expires"] else None
