// Croupier's reference web table: sign in (dev mode), play money, the five games, war-p2p's dealer seat,
// history with step-by-step recall, responsible-gaming limits, and the fairness check of every round.
import { toJson, toJsonString } from "@bufbuild/protobuf";
import { describeError, devLogin, setToken, tables, wallet } from "./api";
import * as fairness from "./fairness";
import { RoundViewSchema, type RoundView, type SeatStatus, type TableInfo } from "./gen/croupier/v1/table_pb";
import type { WatchSeatResponse } from "./gen/croupier/v1/table_pb";
import { GetLimitsResponseSchema } from "./gen/croupier/v1/wallet_pb";
import { SeatWatch } from "./watch";

// The verifier on the page, and the last round it checked as shown (protobuf JSON with the proto field
// names, as `croupier verify --save` writes it), for the browser tests and for anyone curious.
const exposed = { fairness, checked: {} as Record<string, unknown>, watch: undefined as SeatWatch | undefined };
(window as unknown as { croupier: unknown }).croupier = exposed;
const asSaved = (view: RoundView) => toJson(RoundViewSchema, view, { useProtoFieldName: true });

const CURRENCY = "PLAY";
const $ = <T extends HTMLElement = HTMLElement>(id: string) => document.getElementById(id) as T;

function h<K extends keyof HTMLElementTagNameMap>(tag: K, attrs: Record<string, string> = {}, ...children: (Node | string)[]): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) k === "text" ? (el.textContent = v) : el.setAttribute(k, v);
  el.append(...children);
  return el;
}

const money = (minor: bigint | number, signed = false) => {
  const n = Number(minor);
  const text = (Math.abs(n) / 100).toFixed(2);
  return `${n < 0 ? "−" : signed && n > 0 ? "+" : ""}${text}`;
};
const key = () => `web-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 10)}`;

interface Seat { seatId: string; table: TableInfo; role: string; status?: SeatStatus }

const state = {
  player: "",
  tables: [] as TableInfo[],
  seat: undefined as Seat | undefined,
  round: undefined as RoundView | undefined,
  committedBefore: "" as string,
  bets: {} as Record<string, number>,
  history: [] as RoundView[],
  recall: { view: undefined as RoundView | undefined, step: 0 },
};

// ---------------------------------------------------------------- errors and busy state

function showError(error: unknown): void {
  const box = $("error");
  box.textContent = describeError(error);
  box.hidden = false;
}

let busy = 0;  // calls under way: body[data-busy] while any is (the tests wait for it to go)

async function act(what: () => Promise<void>): Promise<void> {
  $("error").hidden = true;
  document.body.dataset.busy = String(++busy);
  try {
    await what();
  } catch (e) {
    showError(e);
  } finally {
    if (--busy === 0) delete document.body.dataset.busy;
    else document.body.dataset.busy = String(busy);
  }
}

// ---------------------------------------------------------------- sign in, wallet, limits

async function signIn(token: string, player: string): Promise<void> {
  setToken(token);
  state.player = player;
  $("who").textContent = player ? `Playing as ${player} (play money)` : "Signed in with a token";
  $("signed-in").hidden = false;
  $("login-panel").hidden = true;
  state.tables = (await tables.listTables({})).tables.filter((t) => t.currency === CURRENCY);
  const select = $<HTMLSelectElement>("table");
  select.replaceChildren(...state.tables.map((t) => h("option", { value: t.tableId, text: `${t.tableId} (${t.game}${t.tableType ? ` type ${t.tableType}` : ""})` })));
  await Promise.all([refreshBalance(), refreshLimits(), refreshHistory()]);
}

async function refreshBalance(): Promise<void> {
  const { balances } = await wallet.getBalances({});
  const play = balances.find((b) => b.currency === CURRENCY);
  $("balance").textContent = `${money(play?.available ?? 0n)} ${CURRENCY}`;
  $("balance").dataset.minor = String(play?.available ?? 0n);
}

async function topUp(): Promise<void> {
  const amount = Math.round(Number($<HTMLInputElement>("topup-amount").value) * 100);
  await wallet.topUpPlayMoney({ amount: { amountMinor: BigInt(amount), currency: CURRENCY }, transactionId: key() });
  await refreshBalance();
}

function limitField(id: string): bigint | undefined {
  const raw = $<HTMLInputElement>(id).value.trim();
  return raw === "" ? undefined : BigInt(Math.round(Number(raw) * 100));
}

async function setLimits(): Promise<void> {
  const until = $<HTMLInputElement>("limit-exclude-until").value.trim();
  await wallet.setLimits({
    currency: CURRENCY,
    maxStake: limitField("limit-max-stake"),
    dailyWager: limitField("limit-daily-wager"),
    dailyLoss: limitField("limit-daily-loss"),
    selfExcludedUntil: until === "" ? undefined : until === "-" ? "" : new Date(until).toISOString(),
  });
  await refreshLimits();
}

async function refreshLimits(): Promise<void> {
  const limits = await wallet.getLimits({});
  $("limits-view").textContent = toJsonString(GetLimitsResponseSchema, limits, { prettySpaces: 1 });
}

// ---------------------------------------------------------------- seats

async function join(role: "player" | "dealer"): Promise<void> {
  stopWatching();
  const tableId = $<HTMLSelectElement>("table").value;
  const nickname = $<HTMLInputElement>("nickname").value.trim();
  const autoConfirm = $<HTMLInputElement>("auto-confirm").checked;
  const joined = await tables.joinTable({ tableId, role, nickname, autoConfirm });
  state.seat = { seatId: joined.seatId, table: joined.table!, role, status: joined.status };
  state.round = undefined;
  state.bets = {};
  const main = joined.table!.bets[0];
  if (role === "player" && main) state.bets[main] = Number(joined.table!.limits[main]?.min ?? 0n);
  renderSeat();
  renderRound();
  startWatching();
}

async function leave(): Promise<void> {
  if (!state.seat) return;
  stopWatching();
  await tables.leaveTable({ seatId: state.seat.seatId });
  stopWatching();
  state.seat = undefined;
  state.round = undefined;
  renderSeat();
  renderRound();
  await refreshBalance();
}

async function refreshSeat(): Promise<void> {
  if (!state.seat) return;
  state.seat.status = (await tables.getSeatStatus({ seatId: state.seat.seatId })).status;
  renderStatus();
  await refreshBalance();  // a settlement reaches the wallet a moment after the round
  const last = state.seat.status?.lastRoundId;
  // After the page's own calls; WatchSeat pushes the rest.
  if (state.seat.role === "dealer" && last && (state.round?.roundId !== last || !isOver(state.round))) {
    state.round = (await tables.getRound({ roundId: last })).round;
    renderRound();
    if (state.round && isOver(state.round)) void verifyWhenRevealed(state.round.roundId);
  }
}

// The seat's live stream (its presence at the table): seat changes and every round step at it.
function startWatching(): void {
  stopWatching();
  if (state.seat) exposed.watch = new SeatWatch(state.seat.seatId, onSeatEvent, showError);
  $("live").replaceChildren();
}

function stopWatching(): void {
  exposed.watch?.stop();
  exposed.watch = undefined;
}

function logLive(text: string, attrs: Record<string, string> = {}): void {
  $("live").prepend(h("li", { ...attrs, text }));
}

function onSeatEvent(message: WatchSeatResponse): void {
  const event = message.event;
  const seat = state.seat;
  if (!seat) return;
  if (event.case === "seatChanged") {
    seat.status = event.value.status;
    renderStatus();
    $("may-deal").textContent = event.value.mayDeal ? "yes" : event.value.mayDealMissing || "no";
    logLive(`seat: ${event.value.change}`, { "data-change": event.value.change });
    if (event.value.change === "round_over") void Promise.all([refreshBalance(), refreshHistory()]).catch(showError);
  } else if (event.case === "roundUpdate") {
    const { step, round, causedBy } = event.value;
    if (!step || !round) return;
    logLive(`round ${round.roundId.slice(0, 8)} v${step.version} ${step.eventType}${causedBy ? ` (${causedBy})` : ""}`,
      { "data-round": round.roundId, "data-version": String(step.version), "data-event": step.eventType, "data-caused-by": causedBy });
    // The dealer follows the paired player's rounds; a player sees the keeper's (or presence's) moves on theirs.
    const followed = seat.role === "dealer" || causedBy !== "";
    if (followed && (state.round?.roundId !== round.roundId || round.version >= state.round.version)) {
      state.round = round;
      renderRound();
      if (isOver(round) && $("verdict").dataset.state === "") void verifyWhenRevealed(round.roundId).catch(showError);
    }
  } else if (event.case === "seatEnded") {
    logLive(`seat ended: ${event.value.reason}`, { "data-ended": event.value.reason });
    showError(new Error(`the seat ended (${event.value.reason}): join a table again`));
  }
}

async function confirm(auto?: "on" | "off"): Promise<void> {
  if (!state.seat) return;
  state.seat.status = (await tables.confirmRound({ seatId: state.seat.seatId, autoConfirm: auto ?? "" })).status;
  renderStatus();
}

const STATUS_FIELDS: [keyof SeatStatus, string, boolean][] = [
  ["role", "Role", false], ["nickname", "Nickname", false], ["opponentNickname", "Opponent", false],
  ["lastRoundId", "Last round", false], ["lastRoundPhase", "Last round's phase", false], ["lastRoundResult", "Last round's result", true],
  ["lastRoundCommission", "Last round's commission", true], ["dealerPoints", "Dealer points", false], ["commissionPaidLastRound", "Commission paid (last dealt)", true],
  ["balance", "Balance", true], ["maxAnte", "Largest ante now", true], ["autoConfirm", "Auto-confirm", false], ["confirmed", "Next round confirmed", false],
  ["nextRoundId", "Next round", false], ["nextCommitment", "Next round's commitment", false],
];

function renderStatus(): void {
  const status = state.seat?.status;
  $("seat-status").replaceChildren(
    ...(status ? STATUS_FIELDS.map(([field, label, isMoney]) => {
      const value = status[field];
      const text = isMoney ? money(value as bigint, field === "lastRoundResult") : String(value ?? "");
      return h("div", { class: "box" }, h("label", { text: label }), h("output", { "data-field": String(field), text }));
    }) : []),
  );
  $("commitment").textContent = status?.nextCommitment ?? "";
  $("dealer-controls").hidden = state.seat?.role !== "dealer";
}

function renderSeat(): void {
  const seat = state.seat;
  $("seat").hidden = !seat;
  if (!seat) return;
  const t = seat.table;
  $("seat-title").textContent = `${t.tableId} — ${t.game}${t.tableType ? ` type ${t.tableType}` : ""}, ${t.decks} deck(s), seat ${seat.seatId} as ${seat.role}`;
  $("betting").hidden = seat.role !== "player";
  renderBets();
  renderStatus();
}

function renderBets(): void {
  const t = state.seat?.table;
  if (!t) return;
  $("bets").replaceChildren(
    ...t.bets.map((name) => {
      const limit = t.limits[name];
      const amount = state.bets[name] ?? 0;
      return h("div", { class: "bet", "data-bet": name },
        h("span", { class: "bet-name", text: name }),
        h("output", { id: `bet-${name}`, text: money(amount) }),
        h("span", { class: "limits", text: `limits ${money(limit?.min ?? 0n)}–${money(limit?.max ?? 0n)}` }),
        ...t.chips.map((chip) => {
          const b = h("button", { class: "chip", "data-bet": name, "data-chip": String(chip), text: money(chip) });
          b.onclick = () => addChip(name, Number(chip));
          return b;
        }),
        Object.assign(h("button", { class: "clear", "data-clear": name, text: "clear" }), { onclick: () => { delete state.bets[name]; renderBets(); } }),
      );
    }),
  );
}

function addChip(name: string, chip: number): void {
  const max = Number(state.seat?.table.limits[name]?.max ?? 0n);
  const next = (state.bets[name] ?? 0) + chip;
  if (max && next > max) return showError(new Error(`${name}: at most ${money(max)} at this table`));
  state.bets[name] = next;
  renderBets();
}

// ---------------------------------------------------------------- a round

const isOver = (view?: RoundView) => view !== undefined && (view.phase === "settled" || view.phase === "voided");

async function placeAndDeal(): Promise<void> {
  const seat = state.seat!;
  const { status } = await tables.getSeatStatus({ seatId: seat.seatId });
  state.committedBefore = status?.nextCommitment ?? "";  // shown before the bets: checked after the round
  const bets: Record<string, bigint> = {};
  for (const [name, amount] of Object.entries(state.bets)) if (amount > 0) bets[name] = BigInt(amount);
  const cutSeed = $<HTMLInputElement>("cut-seed").value;
  const { round } = await tables.placeBets({ seatId: seat.seatId, bets, idempotencyKey: key(), cutSeed });
  await afterBets(round!);
}

async function rebet(): Promise<void> {
  const seat = state.seat!;
  const { status } = await tables.getSeatStatus({ seatId: seat.seatId });
  state.committedBefore = status?.nextCommitment ?? "";
  const { round } = await tables.rebet({ seatId: seat.seatId, idempotencyKey: key(), cutSeed: $<HTMLInputElement>("cut-seed").value });
  await afterBets(round!);
}

async function afterBets(placed: RoundView): Promise<void> {
  state.round = placed;
  renderRound();
  state.round = (await tables.deal({ roundId: placed.roundId, version: placed.version })).round;
  renderRound();
  await roundMoved();
}

async function decide(choice: string, bet: string): Promise<void> {
  const view = state.round!;
  state.round = (await tables.decide({ roundId: view.roundId, choice, bet, version: view.version })).round;
  renderRound();
  await roundMoved();
}

async function roundMoved(): Promise<void> {
  if (!isOver(state.round)) return;
  await Promise.all([refreshBalance(), refreshSeat(), refreshHistory()]);
  await verifyWhenRevealed(state.round!.roundId);
  // The dealer points and the commission reach the seat from other services a moment after the
  // round, as the shoe's reveal does: show the seat again once the reveal is in.
  await refreshSeat();
}

function cardEl(c: { card: string; hand: string; faceUp: boolean; position: number }): HTMLElement {
  const red = c.card.endsWith("h") || c.card.endsWith("d");
  const suit: Record<string, string> = { c: "♣", d: "♦", h: "♥", s: "♠" };
  const face = c.card ? `${c.card[0] === "T" ? "10" : c.card[0]}${suit[c.card[1]] ?? ""}` : "🂠";
  return h("span", { class: `card${red ? " red" : ""}${c.card ? "" : " down"}`, "data-card": c.card, "data-hand": c.hand, title: `${c.hand}, position ${c.position}`, text: face });
}

function renderCards(container: HTMLElement, cards: RoundView["cards"]): void {
  const hands = new Map<string, HTMLElement>();
  for (const c of cards) {
    if (!hands.has(c.hand)) hands.set(c.hand, h("div", { class: "hand", "data-hand": c.hand }, h("label", { text: c.hand })));
    hands.get(c.hand)!.append(cardEl(c));
  }
  container.replaceChildren(...hands.values());
}

function renderRound(): void {
  const view = state.round;
  $("round").hidden = !view;
  if ($("verdict").dataset.round !== view?.roundId) {
    // Another round: its verdict goes (the same round shown again, e.g. once revealed, keeps it).
    for (const id of ["verdict", "tampered-verdict"]) $(id).replaceChildren();
    $("verdict").dataset.state = "";
    $("verdict").dataset.round = view?.roundId ?? "";
    $("tamper").hidden = true;
  }
  if (!view) return;
  $("round-title").textContent = `Round ${view.roundId} — ${view.phase}${view.role ? ` (you: ${view.role}${view.opponentNickname ? `, vs ${view.opponentNickname}` : ""})` : ""}`;
  $("round").dataset.phase = view.phase;
  $("round-commitment").textContent = view.commitment ? `commitment ${view.commitment}, cut seed ${JSON.stringify(view.cutSeed)} → offset ${view.cutOffset}` : "";
  renderCards($("cards"), view.cards);
  const values = Object.entries(view.handValues).map(([k, v]) => `${k}: ${v}`).join("; ");
  $("hand-values").textContent = values;
  const decisions = $("decisions");
  const bets = view.pendingBets.length ? view.pendingBets : [""];
  decisions.replaceChildren(
    ...(view.phase === "deciding" ? bets.flatMap((bet) => view.options.map((choice) => {
      const b = h("button", { class: "decision", "data-choice": choice, "data-bet": bet, text: bet && view.pendingBets.length > 1 ? `${bet}: ${choice}` : choice });
      b.onclick = () => void act(() => decide(choice, view.pendingBets.length > 1 ? bet : ""));
      return b;
    })) : []),
  );
  const rows = view.results.map((r) => h("tr", { "data-bet": r.bet },
    h("td", { text: r.bet }), h("td", { text: money(r.stake) }), h("td", { text: money(r.returned) }), h("td", { text: money(r.net, true) }), h("td", { text: r.outcome })));
  $("settlement").replaceChildren(...rows);
  $("settlement-table").hidden = rows.length === 0;
  const extra = view.role === "dealer" ? `dealer net ${money(view.dealerNet, true)}, commission ${money(view.commission)}`
    : `staked ${money(view.totalStaked)}, returned ${money(view.totalReturned)}${view.commission ? `, commission ${money(view.commission)}` : ""}${view.balanceAfter ? `; balance ${money(view.balanceBefore)} → ${money(view.balanceAfter)}` : ""}`;
  $("totals").textContent = isOver(view) ? `${view.phase}: ${extra}${view.voidReason ? ` (${view.voidReason})` : ""}` : "";
  $("rebet").hidden = !(isOver(view) && state.seat?.role === "player");
}

function renderReport(container: HTMLElement, report: fairness.Report, title: string): void {
  container.dataset.state = report.ok ? "ok" : "failed";
  container.replaceChildren(
    h("strong", { class: report.ok ? "pass" : "fail", text: `${title}: ${report.ok ? "VERIFIED" : "FAILED"}` }),
    h("ul", {}, ...report.checks.map((c) => h("li", { class: c.passed ? "pass" : "fail", "data-check": c.name, text: `${c.passed ? "✔" : "✘"} ${c.name}: ${c.reason}` }))),
    h("small", { text: "settlement: replayed by `croupier verify` (the rules library)" }),
  );
}

/** The shoe is revealed a moment after the settlement: poll GetRound briefly, then check it here. */
async function verifyWhenRevealed(roundId: string): Promise<void> {
  $("verdict").dataset.state = "waiting";
  $("verdict").textContent = "waiting for the shoe to be revealed…";
  let view = (await tables.getRound({ roundId })).round!;
  for (let i = 0; i < 50 && !view.revealedSalt; i++) {
    await new Promise((r) => setTimeout(r, 200));
    view = (await tables.getRound({ roundId })).round!;
  }
  if (state.round?.roundId !== roundId) return;
  state.round = view;
  const committedBefore = state.seat?.role === "player" && state.committedBefore ? state.committedBefore : undefined;
  renderRound();  // the round as revealed: every card, the salt and the shoe
  const report = fairness.verifyRound(view, { committedBefore });
  exposed.checked = { round: asSaved(view), committedBefore, report };
  renderReport($("verdict"), report, "This round");
  $("tamper").hidden = false;
}

function showTampered(): void {
  if (!state.round) return;
  const tampered = fairness.tampered(state.round);
  const report = fairness.verifyRound(tampered);
  exposed.checked = { ...exposed.checked, tampered: asSaved({ ...state.round, revealedShoe: [...tampered.revealedShoe] } as RoundView), tamperedReport: report };
  renderReport($("tampered-verdict"), report, "A tampered view of it (two cards of the shoe swapped)");
}

// ---------------------------------------------------------------- history and recall

async function refreshHistory(): Promise<void> {
  state.history = (await tables.listRounds({ limit: 20 })).rounds;
  $("history").replaceChildren(...state.history.map((r) => {
    const net = r.totalReturned - r.totalStaked;
    const li = h("li", { "data-round": r.roundId }, h("button", { class: "recall", text: `${r.game} ${r.roundId} — ${r.phase}, ${money(net, true)}` }));
    li.querySelector("button")!.addEventListener("click", () => void act(() => recall(r.roundId)));
    return li;
  }));
}

async function recall(roundId: string): Promise<void> {
  state.recall = { view: (await tables.getRound({ roundId })).round, step: 0 };
  $("recall").hidden = false;
  renderRecall();
}

function renderRecall(): void {
  const { view, step } = state.recall;
  if (!view) return;
  const shown = view.steps.slice(0, step + 1);
  const s = view.steps[step];
  $("recall-title").textContent = `Round ${view.roundId} (${view.game}) — step ${step + 1} of ${view.steps.length}`;
  $("recall-step").textContent = s ? `v${s.version} ${s.eventType} at ${s.occurredAt}\n${JSON.stringify(JSON.parse(s.payloadJson || "{}"), null, 1)}` : "";
  $("recall-step").dataset.event = s?.eventType ?? "";
  // Cards dealt up to this step, from the CardsDealt steps shown so far.
  const dealt = shown.filter((x) => x.eventType === "CardsDealt").flatMap((x) => (JSON.parse(x.payloadJson).cards ?? []) as { card?: string; hand: string; face_up?: boolean; position?: number }[]);
  renderCards($("recall-cards"), dealt.map((c) => ({ card: c.card ?? "", hand: c.hand, faceUp: Boolean(c.face_up), position: c.position ?? -1 })) as RoundView["cards"]);
  $<HTMLButtonElement>("recall-prev").disabled = step === 0;
  $<HTMLButtonElement>("recall-next").disabled = step >= view.steps.length - 1;
}

// ---------------------------------------------------------------- wiring

function on(id: string, handler: () => Promise<void> | void): void {
  $(id).addEventListener("click", () => void act(async () => handler()));
}

on("login", async () => {
  const player = $<HTMLInputElement>("player").value.trim();
  await signIn(await devLogin(player), player);
});
on("use-token", () => signIn($<HTMLInputElement>("token").value.trim(), ""));
on("topup", topUp);
on("set-limits", setLimits);
on("join", () => join("player"));
on("join-dealer", () => join("dealer"));
on("leave", leave);
on("place", placeAndDeal);
on("rebet", rebet);
on("confirm", () => confirm());
on("auto-on", () => confirm("on"));
on("auto-off", () => confirm("off"));
on("tamper", showTampered);
on("history-refresh", refreshHistory);
on("recall-next", () => { state.recall.step++; renderRecall(); });
on("recall-prev", () => { state.recall.step--; renderRecall(); });
$("app").dataset.ready = "1";
