"""The distractor reports of payments and trading (the KYC, customer and system ones are in `operations`).

Each is written the way a real tool is (summary, WHEN TO USE with English and Turkish trigger phrases,
Example, WHEN NOT TO USE naming its real neighbour), honestly: it says what such a report would answer and
which of the real tools answers the near-miss question. Several sit on purpose next to a real tool
(first-time deposits beside deposits, closed positions beside open ones, server status beside the clock).
"""

from __future__ import annotations

from typing import NamedTuple


class Distractor(NamedTuple):
    name: str
    params: str  # "dates" (start_date, end_date) or "symbol"
    summary: str
    use: str
    triggers: str
    example: str
    not_use: str


BUSINESS: tuple[Distractor, ...] = (
    # ---------------------------------------------------------------- payments (10)
    Distractor(
        "iade_ozeti",
        "dates",
        "Returns refunds paid back to clients for a day or range: count, total USD, reasons.",
        "the user asks about refunds or money returned to clients after a cancelled payment.",
        '"refunds today", "how many refunds", "iade", "iadeler", "bugünkü iadeler", "geri ödeme"',
        '"Bugün kaç iade yapıldı?" / "What was the refund total yesterday?"',
        "ordinary withdrawals -> cekim_ozeti. Deposits -> depozit_ozeti.",
    ),
    Distractor(
        "chargeback_ozeti",
        "dates",
        "Returns card chargebacks (disputes opened by the card issuer): count, USD, status.",
        "the user asks about chargebacks, card disputes or reversed card payments.",
        '"chargebacks this week", "card disputes", "ters ibraz", "kart itirazları", "chargeback sayısı"',
        '"Bu hafta kaç chargeback geldi?" / "How many chargebacks were opened yesterday?"',
        "deposits by card -> depozit_ozeti. Refunds we paid ourselves -> iade_ozeti.",
    ),
    Distractor(
        "odeme_yontemi_basari",
        "dates",
        "Returns the success rate of each payment method (card, bank, crypto, e-wallet).",
        "the user asks which payment method fails most, acceptance or approval rates of payment providers.",
        '"payment success rate", "card approval rate", "ödeme başarı oranı", "hangi yöntem reddediliyor"',
        '"Kartla ödemelerin başarı oranı nedir?" / "What is the approval rate of card payments?"',
        "the amounts deposited by method -> depozit_ozeti. Single failed payments -> basarisiz_odeme_ozeti.",
    ),
    Distractor(
        "bekleyen_havale",
        "dates",
        "Returns incoming bank transfers announced by clients but not yet received.",
        "the user asks about incoming wire transfers that are announced but not credited yet.",
        '"incoming wires not received", "pending bank transfers in", "gelmeyen havaleler", "bekleyen havale"',
        '"Henüz hesaba geçmeyen havaleler hangileri?" / "Which incoming wires are still pending?"',
        "withdrawals awaiting approval -> cekim_ozeti. Deposits already received -> depozit_ozeti.",
    ),
    Distractor(
        "komisyon_ozeti",
        "dates",
        "Returns fees and commissions the company collected: by type, total USD.",
        "the user asks about commissions, fees charged, or fee revenue.",
        '"commission revenue", "fees collected", "komisyon geliri", "alınan komisyonlar", "ücret toplamı"',
        '"Dün ne kadar komisyon alındı?" / "How much commission did we earn this month?"',
        "trading volume -> islem_hacmi. Overnight swap charges -> swap_ozeti.",
    ),
    Distractor(
        "kampanya_bonusu",
        "dates",
        "Returns promotional bonuses credited to clients: count, total USD, campaign.",
        "the user asks about bonuses, promotions or credit given to clients by a campaign.",
        '"bonuses credited", "welcome bonus total", "bonus", "verilen bonuslar", "kampanya kredisi"',
        '"Bu ay kaç bonus verildi?" / "What bonuses were credited yesterday?"',
        "real money deposited -> depozit_ozeti. A customer's balance -> musteri_bakiyesi.",
    ),
    Distractor(
        "kur_farki_raporu",
        "dates",
        "Returns currency conversion results: deposits and withdrawals converted to USD and the FX gain or loss.",
        "the user asks about exchange-rate conversion, FX differences or conversion fees on payments.",
        '"fx conversion", "exchange rate difference", "kur farkı", "döviz çevrim farkı", "çevrim kârı"',
        '"Dünkü kur farkı ne kadar?" / "What was the FX conversion gain last week?"',
        "plain deposit totals -> depozit_ozeti. Withdrawal totals -> cekim_ozeti.",
    ),
    Distractor(
        "ilk_yatirim_ozeti",
        "dates",
        "Returns first-time deposits (FTD): clients who paid in for the very first time, count and USD.",
        "the user asks about FTDs, first deposits or newly funded clients.",
        '"first time deposits", "FTD count", "ilk yatırım", "ilk kez yatıran müşteriler", "FTD sayısı"',
        '"Bugün kaç FTD var?" / "How many first-time depositors were there yesterday?"',
        "all deposits (not only first ones) -> depozit_ozeti. New registrations -> yeni_musteri_ozeti.",
    ),
    Distractor(
        "basarisiz_odeme_ozeti",
        "dates",
        "Returns failed or declined payment attempts: count, USD, decline reason.",
        "the user asks about failed, declined or rejected payment attempts.",
        '"failed payments", "declined deposits", "başarısız ödemeler", "reddedilen ödemeler", "hata veren yatırımlar"',
        '"Bugün kaç ödeme başarısız oldu?" / "How many payments were declined today?"',
        "successful deposits -> depozit_ozeti. Rejected withdrawals -> cekim_ozeti.",
    ),
    Distractor(
        "ic_transfer_ozeti",
        "dates",
        "Returns internal transfers between a client's own accounts: count and USD.",
        "the user asks about transfers between accounts inside the company (not money in or out).",
        '"internal transfers", "account to account transfer", "hesaplar arası transfer", "iç transfer", "virman"',
        '"Dün kaç hesaplar arası transfer yapıldı?" / "What was the internal transfer total today?"',
        "money paid in -> depozit_ozeti. Money paid out -> cekim_ozeti.",
    ),
    # ---------------------------------------------------------------- trading (10)
    Distractor(
        "swap_ozeti",
        "dates",
        "Returns overnight swap (rollover) charges and credits by symbol.",
        "the user asks about swaps, rollover or overnight financing charges.",
        '"swap charges", "rollover fees", "swap", "gecelik faiz", "swap ücretleri"',
        '"Dün ne kadar swap alındı?" / "What were the swap charges on EURUSD last night?"',
        "open positions -> pozisyon_dagilimi. Commissions -> komisyon_ozeti.",
    ),
    Distractor(
        "marjin_cagrisi_ozeti",
        "dates",
        "Returns margin calls and stop-outs: accounts affected, symbols, USD closed.",
        "the user asks about margin calls, stop outs or accounts closed out for low margin.",
        '"margin calls today", "stop outs", "marjin çağrısı", "stop out olan hesaplar", "teminat uyarısı"',
        '"Bugün kaç hesap stop out oldu?" / "How many margin calls were there yesterday?"',
        "what a margin call is (general knowledge) -> answer without a tool. Open positions -> pozisyon_dagilimi.",
    ),
    Distractor(
        "en_cok_islem_goren",
        "dates",
        "Returns the ranking of the most traded symbols by number of trades.",
        "the user asks which instruments are the most popular or most traded, a top list of symbols.",
        '"most traded symbols", "top instruments", "en çok işlem gören", "en popüler enstrümanlar", "top 10 sembol"',
        '"En çok işlem gören 5 sembol hangisi?" / "Which symbols were the most traded this week?"',
        "the volume in lots of one symbol -> islem_hacmi. Open positions -> pozisyon_dagilimi.",
    ),
    Distractor(
        "acik_emir_ozeti",
        "symbol",
        "Returns pending (not yet filled) limit and stop orders by symbol.",
        "the user asks about pending orders, limit orders or stop orders waiting to be filled.",
        '"pending orders", "limit orders", "bekleyen emirler", "limit emirler", "gerçekleşmemiş emirler"',
        '"EURUSD\'de kaç bekleyen limit emir var?" / "Show pending orders on gold."',
        "positions that are already open -> pozisyon_dagilimi. Executed trades -> islem_hacmi.",
    ),
    Distractor(
        "kar_zarar_ozeti",
        "dates",
        "Returns clients' realized profit and loss on closed trades: total USD, winners vs losers.",
        "the user asks about client profit or loss, P&L, how much clients won or lost.",
        '"client pnl", "profit and loss", "kâr zarar", "müşteri kârı", "ne kadar kazandılar"',
        '"Dün müşteriler ne kadar kâr etti?" / "What was the clients\' realized P&L today?"',
        "one customer's balance -> musteri_bakiyesi. Traded volume -> islem_hacmi.",
    ),
    Distractor(
        "kaldirac_dagilimi",
        "dates",
        "Returns how many accounts use each leverage level (1:30, 1:100, 1:500).",
        "the user asks about leverage settings of accounts or their distribution.",
        '"leverage distribution", "accounts by leverage", "kaldıraç dağılımı", "kaldıraç oranları"',
        '"Kaç hesap 1:500 kaldıraç kullanıyor?" / "Show the leverage distribution."',
        "long vs short positions -> pozisyon_dagilimi.",
    ),
    Distractor(
        "spread_raporu",
        "symbol",
        "Returns average, minimum and maximum spreads per symbol over the day.",
        "the user asks about spreads, bid-ask differences or pricing width of a symbol.",
        '"average spread", "spread on EURUSD", "spread", "alış satış farkı", "ortalama spread"',
        '"EURUSD ortalama spread ne?" / "What was the average spread on gold today?"',
        "trading volume -> islem_hacmi. Price feed outages -> fiyat_akisi_durumu.",
    ),
    Distractor(
        "kapanan_pozisyonlar",
        "symbol",
        "Returns positions CLOSED during the day by symbol: count, lots, long vs short.",
        "the user asks about positions that were closed, exits, or trades closed today.",
        '"closed positions", "positions closed today", "kapanan pozisyonlar", "kapatılan işlemler"',
        '"Bugün EURUSD\'de kaç pozisyon kapandı?" / "How many gold positions were closed today?"',
        "positions that are still OPEN -> pozisyon_dagilimi. Volume traded -> islem_hacmi.",
    ),
    Distractor(
        "hedge_ozeti",
        "symbol",
        "Returns the company's net exposure per symbol and how much of it is hedged with liquidity providers.",
        "the user asks about the company's own net exposure, hedging, or what is passed to liquidity providers.",
        '"net exposure", "hedge ratio", "şirket pozisyonu", "hedge oranı", "likidite sağlayıcıya aktarılan"',
        '"Altında net açığımız ne kadar?" / "How much of the EURUSD exposure is hedged?"',
        "clients' long vs short accounts -> pozisyon_dagilimi.",
    ),
    Distractor(
        "islem_sayisi_saatlik",
        "dates",
        "Returns the number of trades per hour of the day (activity profile).",
        "the user asks at which hours clients trade most, trading activity by hour.",
        '"trades per hour", "busiest trading hour", "saatlik işlem sayısı", "en yoğun saat"',
        '"Hangi saatte en çok işlem yapılıyor?" / "Show trades per hour for yesterday."',
        "total volume or lots of a day -> islem_hacmi.",
    ),
)
