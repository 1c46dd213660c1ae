// Croupier's reference web table: sign in (dev mode), play money, the five games on a felt, war-p2p's
// dealer seat, history with step-by-step recall, responsible-gaming limits, and the fairness check of
// every round. The sign-in and the seat survive a reload (session.ts): the round in progress comes back
// with its choices, their cost and the countdown. The seat's stream (WatchSeat) keeps the page current.
import { toJson } from "@bufbuild/protobuf";
import { describeError, devLogin, setToken, tables } from "./api";
import { BetSlip, renderSlip } from "./chips";
import { $, h, shortRef } from "./dom";
import * as fairness from "./fairness";
import { RoundViewSchema, type RoundView, type SeatStatus, type TableInfo, type WatchSeatResponse } from "./gen/croupier/v1/table_pb";
import { currentLocale, initialLocale, named, setLocale, t } from "./i18n";
import { CURRENCY, key, refreshBalance, refreshLimits, setLimits, showBalance, topUp } from "./purse";
import { renderHistory, renderRecall } from "./history";
import { isOver, renderRound } from "./round";
import { loadSession, saveSession, type Session } from "./session";
import { renderStatusBoxes } from "./status";
import { renderReport, revealed } from "./verdict";
import { SeatWatch } from "./watch";

// The verifier on the page, and the last round it checked as shown (protobuf JSON with the proto field
// names, as `croupier verify --save` writes it), for the browser tests and for anyone curious.
const exposed = { fairness, tables, checked: {} as Record<string, unknown>, watch: undefined as SeatWatch | undefined };
(window as unknown as { croupier: unknown }).croupier = exposed;
const asSaved = (view: RoundView) => toJson(RoundViewSchema, view, { useProtoFieldName: true });


interface Seat { seatId: string; table: TableInfo; role: string; status?: SeatStatus; slip: BetSlip }

const state = {
  session: undefined as Session | undefined,
  tables: [] as TableInfo[],
  seat: undefined as Seat | undefined,
  round: undefined as RoundView | undefined,
  committedBefore: "" as string,
  history: [] as RoundView[],
  recall: { view: undefined as RoundView | undefined, step: 0 },
};

// ---------------------------------------------------------------- errors and busy state

/** The refusal beside the action that met it (at the top when no action did). */
function showError(error: unknown, near?: Element): void {
  const box = $("error");
  box.textContent = describeError(error);
  if (near) near.insertAdjacentElement("afterend", box);
  else $("app").prepend(box);
  box.hidden = false;
}

let busy = 0;  // calls under way: body[data-busy] while any is (the tests wait for it to go)

async function act(what: () => Promise<void>, near?: Element): Promise<void> {
  $("error").hidden = true;
  document.body.dataset.busy = String(++busy);
  try {
    await what();
  } catch (e) {
    showError(e, near);
  } finally {
    if (--busy === 0) delete document.body.dataset.busy;
    else document.body.dataset.busy = String(busy);
  }
}

// ---------------------------------------------------------------- sign in, wallet, limits

async function signIn(token: string, player: string): Promise<void> {
  setToken(token);
  state.tables = (await tables.listTables({})).tables.filter((t) => t.currency === CURRENCY);
  state.session = { token, player };
  saveSession(state.session);
  $("who").textContent = player ? t("who.player", { name: player }) : t("who.token");
  $("signed-in").hidden = false;
  $("login-panel").hidden = true;
  renderLobby();
  await Promise.all([refreshBalance(), refreshLimits(), refreshHistory()]);
}

function renderLobby(): void {
  const select = $<HTMLSelectElement>("table");
  const chosen = select.value;
  select.replaceChildren(...state.tables.map((t) => h("option", { value: t.tableId, text: `${named("game", t.game)}${t.tableType ? ` ${t.tableType.toUpperCase()}` : ""} — ${t.tableId}` })));
  if (chosen) select.value = chosen;
}

function signOut(): void {
  stopWatching();
  saveSession(undefined);
  location.reload();
}

// ---------------------------------------------------------------- seats

async function join(role: "player" | "dealer"): Promise<void> {
  const tableId = $<HTMLSelectElement>("table").value;
  const nickname = $<HTMLInputElement>("nickname").value.trim();
  const autoConfirm = $<HTMLInputElement>("auto-confirm").checked;
  const joined = await tables.joinTable({ tableId, role, nickname, autoConfirm });
  await sit(joined.seatId, joined.table!, role, joined.status);
}

/** At the seat (joined, or found again after a reload): its stream, and the round left open at it. */
async function sit(seatId: string, table: TableInfo, role: string, status: SeatStatus | undefined): Promise<void> {
  stopWatching();
  const slip = new BetSlip(table);
  const main = table.bets[0];
  if (role === "player" && main) slip.fill(main, Number(table.limits[main]?.min ?? 0n));
  state.seat = { seatId, table, role, status, slip };
  state.round = undefined;
  state.session = { ...state.session!, seatId, tableId: table.tableId, role };
  saveSession(state.session);
  if (status?.currency === CURRENCY) showBalance(status.balance);
  renderSeat();
  draw();
  startWatching();
  await resumeRound(status);
}

/** The seat's open round, as a client that comes back finds it: asked, dealt if bets were placed but
 * not dealt, and finished from here (issue 25, resume). */
async function resumeRound(status: SeatStatus | undefined): Promise<void> {
  const seat = state.seat;
  if (!seat || !status?.lastRoundId || ["", "settled", "voided"].includes(status.lastRoundPhase)) return;
  const view = (await tables.getRound({ roundId: status.lastRoundId })).round!;
  state.round = view;
  $("resumed").textContent = t("round.resumed", { ref: shortRef(view.roundId), phase: named("phase", view.phase) });
  $("resumed").hidden = false;
  draw();
  if (seat.role === "player" && (view.phase === "betting" || view.phase === "dealing") && view.cards.length === 0) {
    state.round = (await tables.deal({ roundId: view.roundId, version: view.version })).round;
    draw();
    await roundMoved();
  }
}

async function restore(session: Session): Promise<void> {
  try {
    await signIn(session.token, session.player);
  } catch (error) {
    saveSession(undefined);  // an expired or foreign token: sign in again
    throw error;
  }
  const table = state.tables.find((t) => t.tableId === session.tableId);
  if (!session.seatId || !table) return;
  try {
    const { status } = await tables.getSeatStatus({ seatId: session.seatId });
    await sit(session.seatId, table, session.role ?? "player", status);
  } catch (error) {
    state.session = { token: session.token, player: session.player };
    saveSession(state.session);  // the seat is gone (left, idle): back to the lobby
    throw error;
  }
}

async function leave(): Promise<void> {
  if (!state.seat) return;
  await tables.leaveTable({ seatId: state.seat.seatId });
  stopWatching();
  state.seat = undefined;
  state.round = undefined;
  state.session = { token: state.session!.token, player: state.session!.player };
  saveSession(state.session);
  renderSeat();
  draw();
  await refreshBalance();
}

// The seat's live stream (its presence at the table): seat changes and every round step at it.
function startWatching(): void {
  stopWatching();
  if (state.seat) exposed.watch = new SeatWatch(state.seat.seatId, onSeatEvent, (e) => showError(e));
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
    // A round's payout reaches the wallet a moment after round_over: its balance is the settled round's
    // (draw()) until the seat is read again once the round is checked (verifyOnce).
    if (seat.status?.currency === CURRENCY && event.value.change !== "round_over") showBalance(seat.status.balance);
    renderStatus();
    $("may-deal").textContent = event.value.mayDeal ? t("yes") : event.value.mayDealMissing || t("no");
    logLive(`${event.value.change}`, { "data-change": event.value.change });
    if (event.value.change === "round_over") void refreshHistory().catch((e) => showError(e));
  } else if (event.case === "roundUpdate") {
    const { step, round, causedBy } = event.value;
    if (!step || !round) return;
    logLive(`${shortRef(round.roundId)} v${step.version} ${step.eventType}${causedBy ? ` (${causedBy})` : ""}`,
      { "data-round": round.roundId, "data-version": String(step.version), "data-event": step.eventType, "data-caused-by": causedBy });
    // Every step at the seat: the dealer's view of the paired player's rounds, the keeper's moves, and a
    // decision taken from another device.
    if (state.round?.roundId !== round.roundId || round.version >= state.round.version) {
      state.round = round;
      draw();
      if (isOver(round)) void verifyOnce(round.roundId).catch((e) => showError(e));
    }
  } else if (event.case === "seatEnded") {
    logLive(`${event.value.reason}`, { "data-ended": event.value.reason });
    showError(new Error(t("seat.ended", { reason: event.value.reason })));
  }
}

async function confirm(auto?: "on" | "off"): Promise<void> {
  if (!state.seat) return;
  state.seat.status = (await tables.confirmRound({ seatId: state.seat.seatId, autoConfirm: auto ?? "" })).status;
  renderStatus();
}

function renderStatus(): void {
  const seat = state.seat;
  const status = seat?.status;
  renderStatusBoxes($("seat-status"), seat?.table.game ?? "", seat?.role ?? "", status);
  $("commitment").textContent = status?.nextCommitment ?? "";
  $("dealer-controls").hidden = seat?.role !== "dealer";
  if (seat?.role === "player") drawSlip();  // the dealer's cap on the ante may have moved
}

function renderSeat(): void {
  const seat = state.seat;
  $("seat").hidden = !seat;
  $("lobby").hidden = Boolean(seat);
  $("resumed").hidden = true;
  if (!seat) return;
  const table = seat.table;
  $("seat-title").textContent = t("seat.title", { table: table.tableId, game: named("game", table.game), decks: table.decks, role: named("role", seat.role) });
  $("seat-title").dataset.seat = seat.seatId;
  $("betting").hidden = seat.role !== "player";
  renderStatus();
}

function drawSlip(): void {
  const seat = state.seat;
  if (seat?.role === "player") renderSlip(seat.slip, seat.status?.maxAnte ?? 0n, drawSlip);
}

// ---------------------------------------------------------------- a round

function draw(): void {
  const seat = state.seat;
  const verdict = $("verdict");
  if (verdict.dataset.round !== (state.round?.roundId ?? "")) {
    // Another round: the last one's verdict goes (the same round drawn again, e.g. once revealed, keeps it).
    for (const id of ["verdict", "tampered-verdict"]) $(id).replaceChildren();
    verdict.dataset.state = "";
    verdict.dataset.round = state.round?.roundId ?? "";
    $("tamper").hidden = true;
  }
  renderRound(state.round, {
    decide: (choice, bet) => void act(() => decide(choice, bet), document.getElementById("decisions") ?? undefined),
    defaultAction: seat?.table.defaultAction ?? "",
  });
  const round = state.round;
  if (round && isOver(round) && round.role !== "dealer" && round.balanceAfter && round.currency === CURRENCY) showBalance(round.balanceAfter);
  $("place").hidden = Boolean(round && !isOver(round));
  $("rebet").hidden = !(isOver(state.round) && seat?.role === "player");
  $("betting-chips").hidden = Boolean(state.round && !isOver(state.round));
}

async function placeAndDeal(): Promise<void> {
  const seat = state.seat!;
  state.committedBefore = seat.status?.nextCommitment ?? "";  // shown before the bets: checked after the round
  const cutSeed = $<HTMLInputElement>("cut-seed").value;
  const { round } = await tables.placeBets({ seatId: seat.seatId, bets: seat.slip.bets(), idempotencyKey: key(), cutSeed });
  await afterBets(round!);
}

async function rebet(): Promise<void> {
  const seat = state.seat!;
  state.committedBefore = seat.status?.nextCommitment ?? "";
  const { round } = await tables.rebet({ seatId: seat.seatId, idempotencyKey: key(), cutSeed: $<HTMLInputElement>("cut-seed").value });
  await afterBets(round!);
}

async function afterBets(placed: RoundView): Promise<void> {
  $("resumed").hidden = true;
  state.round = placed;
  draw();
  state.round = (await tables.deal({ roundId: placed.roundId, version: placed.version })).round;
  draw();
  await roundMoved();
}

async function decide(choice: string, bet: string): Promise<void> {
  const view = state.round!;
  state.round = (await tables.decide({ roundId: view.roundId, choice, bet, version: view.version })).round;
  draw();
  await roundMoved();
}

async function roundMoved(): Promise<void> {
  if (isOver(state.round)) await verifyOnce(state.round!.roundId);
}

/** The shoe is revealed a moment after the settlement: wait for it, then check the round here (once a round). */
async function verifyOnce(roundId: string): Promise<void> {
  const verdict = $("verdict");
  if (verdict.dataset.round === roundId && verdict.dataset.state !== "") return;  // checked, or being checked
  verdict.dataset.round = roundId;
  verdict.dataset.state = "waiting";
  verdict.textContent = t("verify.waiting");
  $("tampered-verdict").replaceChildren();
  $("tamper").hidden = true;
  const view = await revealed(roundId);
  if (state.round?.roundId !== roundId) return;
  state.round = view;
  const committedBefore = state.seat?.role === "player" && state.committedBefore ? state.committedBefore : undefined;
  draw();  // the round as revealed: every card, the salt and the shoe
  const report = fairness.verifyRound(view, { committedBefore });
  exposed.checked = { round: asSaved(view), committedBefore, report };
  renderReport(verdict, report, t("verify.this"));
  $("tamper").hidden = false;
  await refreshSeat();
}

/** The seat once a round is checked: the figures other services settle a moment after the round (the
 * payout, dealer points, commission), the balance among them; one call a round, the stream does the rest. */
async function refreshSeat(): Promise<void> {
  const seat = state.seat;
  if (!seat) return refreshBalance();
  seat.status = (await tables.getSeatStatus({ seatId: seat.seatId })).status;
  if (seat.status?.currency === CURRENCY) showBalance(seat.status.balance);
  renderStatus();
}

function showTampered(): void {
  if (!state.round) return;
  const tampered = fairness.tampered(state.round);
  const report = fairness.verifyRound(tampered);
  exposed.checked = { ...exposed.checked, tampered: asSaved({ ...state.round, revealedShoe: [...tampered.revealedShoe] } as RoundView), tamperedReport: report };
  renderReport($("tampered-verdict"), report, t("verify.tampered"));
}

// ---------------------------------------------------------------- history and recall

async function refreshHistory(): Promise<void> {
  state.history = (await tables.listRounds({ pageSize: 20 })).rounds;
  renderHistory($("history"), state.history, (roundId) => void act(() => recall(roundId)));
}

async function recall(roundId: string): Promise<void> {
  state.recall = { view: (await tables.getRound({ roundId })).round, step: 0 };
  $("recall").hidden = false;
  renderRecall(state.recall.view, state.recall.step);
}

// ---------------------------------------------------------------- wiring

function on(id: string, handler: () => Promise<void> | void): void {
  const el = $(id);
  el.addEventListener("click", () => void act(async () => handler(), el));
}

function switchLocale(): void {
  setLocale(currentLocale() === "he" ? "en" : "he");
  renderLobby();
  if (state.session) $("who").textContent = state.session.player ? t("who.player", { name: state.session.player }) : t("who.token");
  renderSeat();
  draw();
  renderRecall(state.recall.view, state.recall.step);
  void act(async () => { await Promise.all([refreshHistory(), refreshLimits()]); });
}

on("login", async () => {
  const player = $<HTMLInputElement>("player").value.trim();
  await signIn(await devLogin(player), player);
});
on("use-token", () => signIn($<HTMLInputElement>("token").value.trim(), ""));
on("signout", signOut);
on("lang", switchLocale);
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
on("recall-next", () => renderRecall(state.recall.view, ++state.recall.step));
on("recall-prev", () => renderRecall(state.recall.view, --state.recall.step));

setLocale(initialLocale());
const saved = loadSession();
void (saved ? act(() => restore(saved)) : Promise.resolve()).finally(() => { $("app").dataset.ready = "1"; });
