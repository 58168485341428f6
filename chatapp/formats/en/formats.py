"""Dates as the whole site writes them, the staff console's lists included: year first, a
24-hour clock (Django's English default, "Nov. 28, 2026, 8:33 p.m.", sat beside the
console's own "2026-11-28 20:46" on one page)."""

DATE_FORMAT = "Y-m-d"
DATETIME_FORMAT = "Y-m-d H:i"
TIME_FORMAT = "H:i"
SHORT_DATE_FORMAT = "Y-m-d"
SHORT_DATETIME_FORMAT = "Y-m-d H:i"
