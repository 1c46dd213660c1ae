// A round drawn on the felt: each hand at its place (the dealer's across the table, the board between,
// yours in front of you), the hands named, the decision asked with what each choice adds to the stake
// and the countdown to the keeper's default, who decided where the keeper did, and the settlement line
// by line. Only drawing: the calls are main.ts's.
import { $, h, shortRef } from "./dom";
import type { RoundView } from "./gen/croupier/v1/table_pb";
import { money, named, t } from "./i18n";

export const isOver = (view?: RoundView) => view !== undefined && (view.phase === "settled" || view.phase === "voided");

type CardLike = { card: string; hand: string; faceUp: boolean; position: number };

function cardEl(c: CardLike): HTMLElement {
  const red = c.card.endsWith("h") || c.card.endsWith("d");
  const suit: Record<string, string> = { c: "♣", d: "♦", h: "♥", s: "♠" };
  const face = c.card ? `${c.card[0] === "T" ? "10" : c.card[0]}${suit[c.card[1]] ?? ""}` : "🂠";
  return h("span", { class: `card${red ? " red" : ""}${c.card ? "" : " down"}`, dir: "ltr", "data-card": c.card, "data-hand": c.hand,
    title: `${named("hand", c.hand)}, #${c.position}`, text: face });
}

const zoneOf = (hand: string) => hand === "burn" ? "burn" : hand === "board" ? "board" : hand.startsWith("dealer") ? "dealer" : "player";

/** Whose hand it is, from the viewer's side: at a player-dealer's round the dealer sees their own hand as
 * theirs and the player's under the player's nickname. */
function handLabel(hand: string, side: Side): string {
  if (side.role !== "dealer") return named("hand", hand);
  const zone = zoneOf(hand);
  if (zone === "dealer") return `${named("hand", "player")} (${named("role", "dealer")})`;
  if (zone === "player") return side.opponent || named("role", "player");
  return named("hand", hand);
}

interface Side { role: string; opponent: string }

/** The cards by hand, each hand in its zone of the felt (the viewer's own in front), named when the round names it. */
export function renderCards(container: HTMLElement, cards: readonly CardLike[], handValues: Record<string, string> = {},
  side: Side = { role: "", opponent: "" }): void {
  const order = side.role === "dealer" ? ["player", "board", "dealer", "burn"] : ["dealer", "board", "player", "burn"];
  const zones = new Map(order.map((z) => [z, h("div", { class: "zone", "data-zone": z })]));
  const hands = new Map<string, HTMLElement>();
  for (const c of cards) {
    if (!hands.has(c.hand)) {
      const hand = h("div", { class: "hand", "data-hand": c.hand }, h("label", { text: handLabel(c.hand, side) }));
      hands.set(c.hand, hand);
      zones.get(zoneOf(c.hand))!.append(hand);
    }
    hands.get(c.hand)!.append(cardEl(c));
  }
  for (const [hand, value] of Object.entries(handValues)) {
    const at = hands.get(hand) ?? zones.get(zoneOf(hand))!.appendChild(h("div", { class: "hand", "data-hand": hand }, h("label", { text: handLabel(hand, side) })));
    at.append(h("strong", { class: "hand-name", "data-hand-value": hand, text: value }));
  }
  container.replaceChildren(...[...zones.values()].filter((z) => z.childElementCount > 0));
}

export interface RoundActions {
  decide(choice: string, bet: string): void;
  defaultAction: string;
}

let ticking: number | undefined;

/** Seconds left to the deadline, shown until it passes; nothing when no deadline. */
function renderCountdown(deadline: string, defaultAction: string): void {
  const box = $("countdown");
  if (ticking !== undefined) clearInterval(ticking);
  ticking = undefined;
  box.dataset.deadline = deadline;
  box.hidden = !deadline;
  if (!deadline) return;
  const at = Date.parse(deadline);
  const choice = named("choice", defaultAction);
  const tick = () => {
    const left = Math.max(0, Math.ceil((at - Date.now()) / 1000));
    box.dataset.left = String(left);
    box.textContent = left > 0 ? t("round.countdown", { s: left, choice }) : t("round.countdownOver", { choice });
    box.classList.toggle("urgent", left <= 5);
  };
  tick();
  ticking = window.setInterval(tick, 250);
}

function renderDecisions(view: RoundView, actions: RoundActions): void {
  const bets = view.pendingBets.length ? view.pendingBets : [""];
  const several = view.pendingBets.length > 1;
  $("decisions").replaceChildren(...(view.phase === "deciding" && view.role !== "dealer" ? bets.flatMap((bet, index) => view.options.map((choice) => {
    const cost = index === 0 ? view.optionCosts[choice] : undefined;  // the costs answer the first pending bet
    const costText = cost === undefined ? "" : cost > 0n ? t("round.costs", { amount: money(cost, view.currency) }) : t("round.free");
    const b = h("button", { class: "decision", "data-choice": choice, "data-bet": bet, "data-cost": cost === undefined ? "" : String(cost) },
      h("span", { text: `${several ? `${named("betname", bet)}: ` : ""}${named("choice", choice)}` }), h("small", { text: costText }));
    b.onclick = () => actions.decide(choice, several ? bet : "");
    return b;
  })) : []));
}

function renderKeeper(view: RoundView): void {
  const seen = new Set<string>();
  const lines = view.steps.filter((s) => s.causedBy && !seen.has(s.causedByReason) && seen.add(s.causedByReason));
  $("keeper-note").replaceChildren(...lines.map((s) => h("li", { "data-caused-by": s.causedBy, "data-event": s.eventType, text: t("round.keeper", { reason: s.causedByReason }) })));
}

function renderSettlement(view: RoundView): void {
  const c = view.currency;
  const rows = view.results.map((r) => h("tr", { "data-bet": r.bet },
    h("td", { text: named("betname", r.bet) }), h("td", { "data-minor": String(r.stake), text: money(r.stake, c) }),
    h("td", { "data-minor": String(r.returned), text: money(r.returned, c) }),
    h("td", { "data-minor": String(r.net), class: r.net < 0n ? "loss" : r.net > 0n ? "win" : "", text: money(r.net, c, true) }), h("td", { text: r.outcome })));
  $("settlement").replaceChildren(...rows);
  // The dealer reads the player's bets as the player's: the dealer's own result is the totals line.
  $("settlement-caption").textContent = view.role === "dealer" ? t("settle.theirs", { name: view.opponentNickname || named("role", "player") }) : "";
  $("settlement-table").hidden = rows.length === 0;
  const phase = named("phase", view.phase);
  let totals = "";
  if (view.role === "dealer") {
    totals = t("round.dealerNet", { phase, net: money(view.dealerNet, c, true), commission: money(view.commission, c) });
  } else {
    totals = t("round.total", { phase, staked: money(view.totalStaked, c), returned: money(view.totalReturned, c) });
    if (view.commission) totals += `, ${t("round.commission", { amount: money(view.commission, c) })}`;
    if (view.balanceAfter) totals += `; ${t("round.balance", { before: money(view.balanceBefore, c), after: money(view.balanceAfter, c) })}`;
  }
  $("totals").textContent = isOver(view) ? `${totals}${view.voidReason ? ` (${view.voidReason})` : ""}` : "";
  $("totals").dataset.net = String(view.role === "dealer" ? view.dealerNet : view.totalReturned - view.totalStaked);
}

export function renderRound(view: RoundView | undefined, actions: RoundActions): void {
  $("round").hidden = !view;
  if (!view) return renderCountdown("", "");
  const round = $("round");
  round.dataset.phase = view.phase;
  round.dataset.round = view.roundId;
  round.dataset.role = view.role;
  const side = view.role ? ` (${t("round.you", { role: named("role", view.role) })}${view.opponentNickname ? `, ${t("round.vs", { name: view.opponentNickname })}` : ""})` : "";
  $("round-title").textContent = `${t("round.title", { ref: shortRef(view.roundId), phase: named("phase", view.phase) })}${side}`;
  $("round-title").title = view.roundId;
  $("round-commitment").textContent = view.commitment
    ? t("round.commitment", { commitment: view.commitment, seed: JSON.stringify(view.cutSeed), offset: view.cutOffset }) : "";
  renderCards($("cards"), view.cards, view.handValues, { role: view.role, opponent: view.opponentNickname });
  renderDecisions(view, actions);
  renderCountdown(view.phase === "deciding" ? view.decisionDeadline : "", actions.defaultAction);
  renderKeeper(view);
  renderSettlement(view);
}
