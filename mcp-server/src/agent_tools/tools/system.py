"""System tool: the server's clock, date, time zone and host facts."""

from __future__ import annotations

import os
import platform
import socket
import time
from typing import Any

from agent_tools import deps
from agent_tools.tools import tool

_WEEKDAYS_TR = ["Pazartesi", "Salı", "Çarşamba", "Perşembe", "Cuma", "Cumartesi", "Pazar"]


@tool()
def sistem_bilgisi() -> dict[str, Any]:
    """Returns the server's current date, time, weekday and time zone, plus host facts (hostname, OS, CPUs).

    WHEN TO USE: the user asks what time or date it is, which day of the week it is, the time zone,
    or about the server/host itself. Trigger phrases: "what time is it", "what's the date today",
    "which day is it", "server info", "saat kaç", "bugün ne", "bugünün tarihi", "hangi gün",
    "tarih nedir", "sistem bilgisi", "sunucu bilgisi". You do not know the current time or date
    yourself: ALWAYS call this tool for them instead of guessing.

    Example: "Saat kaç?" / "What is today's date?"

    WHEN NOT TO USE: for business numbers (deposits -> depozit_ozeti, withdrawals -> cekim_ozeti,
    balances -> musteri_bakiyesi), for files (dosya_ara / dosya_oku) or notes (not_kaydet /
    notlari_getir). The other report tools already understand "today"/"bugün" themselves, so do not
    call this tool first just to find today's date for them.
    """
    d = deps.current()
    now = d.now()
    offset = now.utcoffset()
    return {
        "datetime": now.isoformat(timespec="seconds"),
        "date": now.date().isoformat(),
        "time": now.strftime("%H:%M:%S"),
        "weekday": now.strftime("%A"),
        "weekday_tr": _WEEKDAYS_TR[now.weekday()],
        "timezone": d.settings.timezone_name(),
        "utc_offset": f"{offset.total_seconds() / 3600:+.1f}h" if offset is not None else "+0.0h",
        "hostname": socket.gethostname(),
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "cpu_count": os.cpu_count(),
        "server_uptime_seconds": round(time.monotonic() - d.started_monotonic, 1),
    }
