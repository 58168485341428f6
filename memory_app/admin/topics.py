"""Memory topics in the staff console: an app's overrides of the managed topics and its custom
topics, with their few-shot examples checked."""

from __future__ import annotations

from django import forms
from django.contrib import admin

from memory_app.models import MemoryTopic
from memory_app.topics import MANAGED_TOPIC_KEYS


class MemoryTopicForm(forms.ModelForm):
    class Meta:
        model = MemoryTopic
        fields = [
            "app_name",
            "key",
            "label",
            "description",
            "few_shot_examples",
            "enabled",
            "ttl_days",
        ]
        help_texts = {
            "key": (
                "A managed topic's key ("
                + ", ".join(sorted(MANAGED_TOPIC_KEYS))
                + ") overrides that topic for the app; any other key adds a custom topic."
            ),
            "few_shot_examples": (
                'A JSON list of examples: [{"text": "what the user said", '
                '"memory": "the memory to keep"}].'
            ),
        }

    def clean_few_shot_examples(self):
        examples = self.cleaned_data["few_shot_examples"]
        if examples in (None, ""):
            return []
        if not isinstance(examples, list) or not all(
            isinstance(example, dict)
            and set(example) == {"text", "memory"}
            and all(isinstance(value, str) and value.strip() for value in example.values())
            for example in examples
        ):
            raise forms.ValidationError(
                'Give a list of objects, each with exactly a "text" and a "memory" string.'
            )
        return examples


@admin.register(MemoryTopic)
class MemoryTopicAdmin(admin.ModelAdmin):
    form = MemoryTopicForm
    list_display = ["label", "key", "app_name", "managed", "enabled", "example_count"]
    list_filter = ["app_name", "managed", "enabled"]
    search_fields = ["key", "label", "description"]
    ordering = ["app_name", "-managed", "key"]

    @admin.display(description="examples")
    def example_count(self, topic: MemoryTopic) -> int:
        return len(topic.few_shot_examples or [])

    def save_model(self, request, obj, form, change):
        obj.managed = obj.key in MANAGED_TOPIC_KEYS
        super().save_model(request, obj, form, change)
