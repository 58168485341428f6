"""The staff console's name; the models' admins live in their apps (their shared base in
``core.admin``)."""

from django.contrib import admin

admin.site.site_header = "Agent memory: staff console"
admin.site.site_title = "Staff console"
admin.site.index_title = "Memories, conversations and schedules"
