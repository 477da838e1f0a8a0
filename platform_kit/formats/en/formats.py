# Dates in the admin as auditors compare them: ISO order, 24-hour clock, UTC (TIME_ZONE), and short enough
# that a list keeps its columns on screen ("2026-12-02 10:34" rather than "Dec. 2, 2026, 10:34 a.m.").
DATE_FORMAT = "Y-m-d"
DATETIME_FORMAT = "Y-m-d H:i"
SHORT_DATE_FORMAT = "Y-m-d"
SHORT_DATETIME_FORMAT = "Y-m-d H:i"
TIME_FORMAT = "H:i"
