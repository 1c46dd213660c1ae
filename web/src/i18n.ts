// Every string the page shows, in one catalogue per locale (English and Hebrew, right to left: the
// language of seed 001), and amounts as Intl.NumberFormat gives them in the currency's decimals.
// The page's static text carries data-i18n="key" (data-i18n-placeholder for inputs); the code calls t().

export type Locale = "en" | "he";
type Catalogue = Record<string, string>;

const en: Catalogue = {
  title: "Croupier", tagline: "A reference casino table over the Connect API: every round checked in your browser.",
  "login.title": "Sign in", "login.dev": "Dev mode (the embedded server only): choose a name; the server mints a play-money player's token.",
  "login.button": "Sign in (dev)", "login.token": "Or paste a bearer token (croupier token NAME):", "login.use": "Use token",
  "login.name": "your name", "who.player": "Playing as {name} (play money)", "who.token": "Signed in with a token", "signout": "Sign out",
  balance: "Balance", "topup.button": "Top up play money",
  "limits.summary": "Responsible gaming: limits and self-exclusion (play money)",
  "limits.help": "Amounts in units; empty leaves a limit as it is, 0 removes it. Raises wait out the cooling-off.",
  "limits.maxStake": "Max single stake", "limits.dailyWager": "Daily wager", "limits.dailyLoss": "Daily loss",
  "limits.excludeUntil": "Self-excluded until", "limits.set": "Set limits", "limits.none": "none",
  "limits.pending": "(becomes {amount} on {at})", "limits.today": "{amount} today", "limits.json": "as JSON",
  "lobby.title": "Tables", "lobby.nickname": "nickname", "lobby.sit": "Sit as player", "lobby.deal": "Take the dealer seat",
  "lobby.auto": "auto-confirm (dealers)",
  "seat.title": "{table} — {game}, {decks} deck(s), you are the {role}", "seat.leave": "Leave the seat",
  "seat.mayDeal": "May deal here now:", "seat.confirm": "Confirm the next round", "seat.autoOn": "Auto-confirm on", "seat.autoOff": "Auto-confirm off",
  "seat.commitment": "Next round's commitment (fixed before your bets and cut):", "seat.ended": "the seat ended ({reason}): join a table again",
  "bet.chip": "Chip", "bet.takeBack": "Take back one chip", "bet.clear": "Clear", "bet.limits": "{min}–{max}",
  "bet.over": "{bet}: at most {max} here", "bet.overDealer": "{bet}: the dealer covers at most {max}",
  "bet.cut": "Cut seed (optional)", "bet.cutPlaceholder": "any text", "bet.place": "Deal", "bet.rebet": "Rebet",
  "round.title": "Round {ref} — {phase}", "round.you": "you: {role}", "round.vs": "vs {name}",
  "round.commitment": "commitment {commitment}, cut seed {seed} → offset {offset}",
  "round.countdown": "Decide within {s} s — then the table's default ({choice}) is taken for you",
  "round.countdownOver": "Time is up: the table's default ({choice}) is being taken",
  "round.costs": "adds {amount}", "round.free": "adds nothing", "round.keeper": "Decided by the keeper: {reason}",
  "round.total": "{phase}: staked {staked}, returned {returned}", "round.commission": "commission {amount}",
  "round.balance": "balance {before} → {after}", "round.dealerNet": "{phase}: dealer net {net}, commission {commission}",
  "round.resumed": "Round {ref} was still {phase}: you can finish it here",
  "settle.bet": "bet", "settle.stake": "stake", "settle.returned": "returned", "settle.net": "net", "settle.outcome": "outcome",
  "settle.theirs": "{name}'s bets, as the player sees them",
  "verify.tamper": "Show a tampered view failing", "verify.waiting": "waiting for the shoe to be revealed…",
  "verify.this": "This round", "verify.tampered": "A tampered view of it (two cards of the shoe swapped)",
  "verify.ok": "VERIFIED", "verify.failed": "FAILED", "verify.note": "settlement: replayed by `croupier verify` (the rules library)",
  "live.title": "At the table, live", "history.title": "History", "history.refresh": "refresh",
  "recall.title": "Round {ref} ({game}) — step {step} of {steps}", "recall.prev": "◀ step", "recall.next": "step ▶",
  "recall.by": "by the keeper: {reason}",
  "status.role": "Role", "status.opponentNickname": "Opponent", "status.lastRoundPhase": "Last round",
  "status.lastRoundResult": "Last result", "status.lastRoundCommission": "Commission (last round)", "status.dealerPoints": "Dealer points",
  "status.commissionPaidLastRound": "Commission paid (last dealt)", "status.balance": "Balance", "status.maxAnte": "Largest ante now",
  "status.autoConfirm": "Auto-confirm", "status.confirmed": "Next round confirmed",
  "yes": "yes", "no": "no", "house": "house",
  "role.player": "player", "role.dealer": "dealer",
  "phase.betting": "betting", "phase.dealing": "dealing", "phase.deciding": "your decision", "phase.settled": "settled", "phase.voided": "voided",
  "choice.raise": "Raise", "choice.war": "Go to war", "choice.surrender": "Surrender", "choice.battle": "Battle", "choice.call": "Call", "choice.fold": "Fold",
  "hand.player": "You", "hand.dealer": "Dealer", "hand.board": "Board", "hand.burn": "Burned",
  "betname.ante": "Ante", "betname.tie": "Tie", "betname.raise": "Raise", "betname.battle": "Battle", "betname.call": "Call",
  "betname.aa_bonus": "AA bonus", "betname.player": "Player", "betname.dealer": "Dealer", "betname.player_war": "War (player)",
  "betname.dealer_war": "War (dealer)", "betname.tie_plus": "Tie plus", "betname.combo": "Combo", "betname.war": "War",
  "game.casino-war": "Casino War", "game.war-p2p": "War, player-dealer", "game.casino-holdem": "Casino Hold'em",
  "game.battle-royale": "Battle Royale", "game.dueling-for-dollars": "Dueling for Dollars",
  "lang": "עברית",
};

const he: Catalogue = {
  title: "קרופייה", tagline: "שולחן קזינו לדוגמה מעל ה-API: כל סיבוב נבדק בדפדפן שלך.",
  "login.title": "כניסה", "login.dev": "מצב פיתוח (השרת המשובץ בלבד): בחרו שם; השרת מנפיק אסימון של שחקן בכסף משחק.",
  "login.button": "כניסה (פיתוח)", "login.token": "או הדביקו אסימון (croupier token NAME):", "login.use": "שימוש באסימון",
  "login.name": "השם שלך", "who.player": "משחק/ת בתור {name} (כסף משחק)", "who.token": "מחובר/ת עם אסימון", "signout": "יציאה",
  balance: "יתרה", "topup.button": "טעינת כסף משחק",
  "limits.summary": "הימור אחראי: מגבלות והחרגה עצמית (כסף משחק)",
  "limits.help": "סכומים ביחידות; ריק משאיר מגבלה כמות שהיא, 0 מסיר אותה. העלאות ממתינות לתקופת הצינון.",
  "limits.maxStake": "הימור בודד מרבי", "limits.dailyWager": "הימור יומי", "limits.dailyLoss": "הפסד יומי",
  "limits.excludeUntil": "מוחרג/ת עד", "limits.set": "קביעת מגבלות", "limits.none": "ללא",
  "limits.pending": "(יהפוך ל-{amount} ב-{at})", "limits.today": "{amount} היום", "limits.json": "כ-JSON",
  "lobby.title": "שולחנות", "lobby.nickname": "כינוי", "lobby.sit": "לשבת כשחקן", "lobby.deal": "לשבת כדילר",
  "lobby.auto": "אישור אוטומטי (דילרים)",
  "seat.title": "{table} — {game}, {decks} חפיסות, את/ה {role}", "seat.leave": "לעזוב את המושב",
  "seat.mayDeal": "רשאי/ת לחלק כאן עכשיו:", "seat.confirm": "אישור הסיבוב הבא", "seat.autoOn": "אישור אוטומטי פועל", "seat.autoOff": "אישור אוטומטי כבוי",
  "seat.commitment": "ההתחייבות של הסיבוב הבא (נקבעה לפני ההימור והחיתוך):", "seat.ended": "המושב הסתיים ({reason}): הצטרפו שוב לשולחן",
  "bet.chip": "אסימון", "bet.takeBack": "להחזיר אסימון אחד", "bet.clear": "ניקוי", "bet.limits": "{min}–{max}",
  "bet.over": "{bet}: לכל היותר {max} כאן", "bet.overDealer": "{bet}: הדילר מכסה לכל היותר {max}",
  "bet.cut": "זרע חיתוך (רשות)", "bet.cutPlaceholder": "כל טקסט", "bet.place": "חלוקה", "bet.rebet": "הימור חוזר",
  "round.title": "סיבוב {ref} — {phase}", "round.you": "את/ה: {role}", "round.vs": "מול {name}",
  "round.commitment": "התחייבות {commitment}, זרע חיתוך {seed} ← היסט {offset}",
  "round.countdown": "החליטו תוך {s} שניות — אחרת תתקבל ברירת המחדל של השולחן ({choice})",
  "round.countdownOver": "הזמן עבר: ברירת המחדל של השולחן ({choice}) מתקבלת",
  "round.costs": "מוסיף {amount}", "round.free": "לא מוסיף דבר", "round.keeper": "הוחלט על ידי השומר: {reason}",
  "round.total": "{phase}: הימור {staked}, הוחזר {returned}", "round.commission": "עמלה {amount}",
  "round.balance": "יתרה {before} ← {after}", "round.dealerNet": "{phase}: נטו לדילר {net}, עמלה {commission}",
  "round.resumed": "סיבוב {ref} עדיין ב{phase}: אפשר לסיים אותו כאן",
  "settle.bet": "הימור", "settle.stake": "סכום", "settle.returned": "הוחזר", "settle.net": "נטו", "settle.outcome": "תוצאה",
  "settle.theirs": "ההימורים של {name}, כפי שהשחקן רואה אותם",
  "verify.tamper": "הצגת גרסה מזויפת שנכשלת", "verify.waiting": "ממתינים לחשיפת הנעל…",
  "verify.this": "הסיבוב הזה", "verify.tampered": "גרסה מזויפת שלו (שני קלפים בנעל הוחלפו)",
  "verify.ok": "אומת", "verify.failed": "נכשל", "verify.note": "התשלום: משוחזר על ידי croupier verify (ספריית החוקים)",
  "live.title": "ליד השולחן, בשידור חי", "history.title": "היסטוריה", "history.refresh": "רענון",
  "recall.title": "סיבוב {ref} ({game}) — צעד {step} מתוך {steps}", "recall.prev": "צעד ▶", "recall.next": "◀ צעד",
  "recall.by": "על ידי השומר: {reason}",
  "status.role": "תפקיד", "status.opponentNickname": "יריב", "status.lastRoundPhase": "הסיבוב האחרון",
  "status.lastRoundResult": "תוצאה אחרונה", "status.lastRoundCommission": "עמלה (סיבוב אחרון)", "status.dealerPoints": "נקודות דילר",
  "status.commissionPaidLastRound": "עמלה ששולמה (חלוקה אחרונה)", "status.balance": "יתרה", "status.maxAnte": "האנטה הגדולה ביותר כעת",
  "status.autoConfirm": "אישור אוטומטי", "status.confirmed": "הסיבוב הבא אושר",
  "yes": "כן", "no": "לא", "house": "הבית",
  "role.player": "שחקן", "role.dealer": "דילר",
  "phase.betting": "הימורים", "phase.dealing": "חלוקה", "phase.deciding": "ההחלטה שלך", "phase.settled": "הוכרע", "phase.voided": "בוטל",
  "choice.raise": "העלאה", "choice.war": "מלחמה", "choice.surrender": "כניעה", "choice.battle": "קרב", "choice.call": "השוואה", "choice.fold": "פרישה",
  "hand.player": "את/ה", "hand.dealer": "הדילר", "hand.board": "השולחן", "hand.burn": "נשרפו",
  "betname.ante": "אנטה", "betname.tie": "תיקו", "betname.raise": "העלאה", "betname.battle": "קרב", "betname.call": "השוואה",
  "betname.aa_bonus": "בונוס AA", "betname.player": "שחקן", "betname.dealer": "דילר", "betname.player_war": "מלחמה (שחקן)",
  "betname.dealer_war": "מלחמה (דילר)", "betname.tie_plus": "תיקו פלוס", "betname.combo": "קומבו", "betname.war": "מלחמה",
  "game.casino-war": "מלחמת קזינו", "game.war-p2p": "מלחמה, שחקן-דילר", "game.casino-holdem": "הולדם קזינו",
  "game.battle-royale": "באטל רויאל", "game.dueling-for-dollars": "דו-קרב על דולרים",
  "lang": "English",
};

const catalogues: Record<Locale, Catalogue> = { en, he };
const LOCALE_KEY = "croupier.locale";
let locale: Locale = "en";

/** The locale of ?lang=, else the one chosen before, else the browser's when it is Hebrew. */
export function initialLocale(): Locale {
  const asked = new URLSearchParams(location.search).get("lang") ?? localStorage.getItem(LOCALE_KEY) ?? navigator.language;
  return asked.startsWith("he") ? "he" : "en";
}

export function setLocale(next: Locale): void {
  locale = next;
  localStorage.setItem(LOCALE_KEY, next);
  document.documentElement.lang = next;
  document.documentElement.dir = next === "he" ? "rtl" : "ltr";
  document.querySelectorAll<HTMLElement>("[data-i18n]").forEach((el) => { el.textContent = t(el.dataset.i18n!); });
  document.querySelectorAll<HTMLInputElement>("[data-i18n-placeholder]").forEach((el) => { el.placeholder = t(el.dataset.i18nPlaceholder!); });
}

export const currentLocale = (): Locale => locale;

/** The string of `key` in the page's locale (English when missing), with {name} replaced from `params`. */
export function t(key: string, params: Record<string, string | number> = {}): string {
  const text = catalogues[locale][key] ?? en[key] ?? key;
  return text.replace(/\{(\w+)\}/g, (_, name: string) => String(params[name] ?? `{${name}}`));
}

/** A catalogue entry of a family (bet names, choices, hands, phases), or the raw name when none. */
export function named(family: string, name: string): string {
  const key = `${family}.${name}`;
  return catalogues[locale][key] ?? en[key] ?? name;
}

/** The currency's decimals: ISO 4217's as the browser knows them; 2 for play money and the unknown. */
export function decimalsOf(currency: string): number {
  try {
    return new Intl.NumberFormat("en", { style: "currency", currency }).resolvedOptions().maximumFractionDigits ?? 2;
  } catch {
    return 2;
  }
}

/** Minor units in the currency's units, in the page's locale ("1,234.50"; "+5.00" when signed and positive). */
export function money(minor: bigint | number, currency: string, signed = false): string {
  const decimals = decimalsOf(currency);
  const format = new Intl.NumberFormat(locale === "he" ? "he-IL" : "en-US", {
    minimumFractionDigits: decimals, maximumFractionDigits: decimals, signDisplay: signed ? "exceptZero" : "auto",
  });
  const text = format.format(Number(minor) / 10 ** decimals);
  return locale === "he" ? `\u2066${text}\u2069` : text;  // isolated left to right: "-5.00" stays "-5.00" in Hebrew text
}

/** What people type ("12.5") as minor units of the currency. */
export function toMinor(units: string, currency: string): bigint {
  return BigInt(Math.round(Number(units) * 10 ** decimalsOf(currency)));
}
