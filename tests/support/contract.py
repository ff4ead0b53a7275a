"""Names fixed by the tool contract (docs/architecture.md, docs/tools.md), written once for every test layer."""

# The eleven tools, in the MCP server's listing order.
TOOL_NAMES = [
    "sistem_bilgisi",
    "dosya_ara",
    "dosya_oku",
    "not_kaydet",
    "notlari_getir",
    "depozit_ozeti",
    "cekim_ozeti",
    "pozisyon_dagilimi",
    "islem_hacmi",
    "musteri_bakiyesi",
    "kyc_ozeti",
]
