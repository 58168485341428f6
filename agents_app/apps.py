from django.apps import AppConfig
from django.db.models.signals import post_delete, post_save


class AgentsAppConfig(AppConfig):
    name = "agents_app"
    verbose_name = "Apps and agents"

    def ready(self) -> None:
        """Plug long-term memory into the agents' runner (preload, memory tools, triggers),
        and answer the session store's and memory's questions about apps from the records."""
        from access_app.selectors import audit_subject_describer_register
        from agents_app.app_policy import RegisteredAppPolicy
        from agents_app.memory_provider import DjangoMemoryProvider
        from agents_app.runtime.memory_hooks import memory_provider_register
        from agents_app.selectors import link_proposals_describe
        from sessions_app.app_policy import app_policy_register

        audit_subject_describer_register(
            self.get_model("EndUserLinkProposal"), link_proposals_describe
        )
        memory_provider_register(DjangoMemoryProvider())
        policy = RegisteredAppPolicy()
        app_policy_register(policy)

        def app_changed(sender, instance, **kwargs) -> None:
            policy.recent_forget(app_name=instance.name)

        post_save.connect(app_changed, sender=self.get_model("App"), weak=False)
        post_delete.connect(app_changed, sender=self.get_model("App"), weak=False)
