// The bets being built before a deal, as chips on betting circles (seeds 000-003): pick a chip from the
// rack, click a circle to add one, right-click it (or −) to take the last one back. A chip that would
// pass the table's maximum, or the largest ante a player-dealer covers (SeatStatus.max_ante), is refused
// beside the circle, not silently dropped.
import { $, h } from "./dom";
import type { TableInfo } from "./gen/croupier/v1/table_pb";
import { money, named, t } from "./i18n";

export class BetSlip {
  private stacks: Record<string, number[]> = {};
  selected: number;

  constructor(readonly table: TableInfo) {
    this.selected = Number(table.chips[0] ?? 1n);
  }

  amount(bet: string): number {
    return (this.stacks[bet] ?? []).reduce((a, b) => a + b, 0);
  }

  chipsOn(bet: string): readonly number[] {
    return this.stacks[bet] ?? [];
  }

  /** The most the circle takes: the table's maximum, or less where the dealer covers less. */
  cap(bet: string, maxAnte: bigint): { max: number; byDealer: boolean } {
    const max = Number(this.table.limits[bet]?.max ?? 0n);
    if (bet === "ante" && maxAnte > 0n && Number(maxAnte) < max) return { max: Number(maxAnte), byDealer: true };
    return { max, byDealer: false };
  }

  /** Adds one chip; the refusal in words when it would pass the cap. */
  add(bet: string, chip: number, maxAnte: bigint): string | undefined {
    const { max, byDealer } = this.cap(bet, maxAnte);
    if (max && this.amount(bet) + chip > max) {
      return t(byDealer ? "bet.overDealer" : "bet.over", { bet: named("betname", bet), max: money(max, this.table.currency) });
    }
    (this.stacks[bet] ??= []).push(chip);
    return undefined;
  }

  takeBack(bet: string): void {
    this.stacks[bet]?.pop();
  }

  clear(bet: string): void {
    delete this.stacks[bet];
  }

  /** `amount` as chips, the largest first (the table's minimum on the main bet when sitting down). */
  fill(bet: string, amount: number): void {
    const chips = this.table.chips.map(Number).sort((a, b) => b - a);
    const stack: number[] = [];
    for (const chip of chips) while (amount >= chip) { stack.push(chip); amount -= chip; }
    this.stacks[bet] = stack;
  }

  bets(): Record<string, bigint> {
    const bets: Record<string, bigint> = {};
    for (const name of Object.keys(this.stacks)) if (this.amount(name) > 0) bets[name] = BigInt(this.amount(name));
    return bets;
  }
}

/** The rack and the circles, drawn again after every change. */
export function renderSlip(slip: BetSlip, maxAnte: bigint, changed: () => void): void {
  const { table } = slip;
  const currency = table.currency;
  const refuse = (bet: string, message: string | undefined) => {
    const box = document.querySelector<HTMLElement>(`.spot[data-bet='${bet}'] .spot-error`);
    if (box) { box.textContent = message ?? ""; box.hidden = !message; }
  };
  $("rack").replaceChildren(...table.chips.map((value) => {
    const chip = Number(value);
    const b = h("button", { class: `chip${chip === slip.selected ? " selected" : ""}`, "data-chip": String(chip), title: t("bet.chip"), text: money(chip, currency) });
    b.onclick = () => { slip.selected = chip; changed(); };
    return b;
  }));
  $("bets").replaceChildren(...table.bets.map((bet) => {
    const limit = table.limits[bet];
    const { max, byDealer } = slip.cap(bet, maxAnte);
    const amount = slip.amount(bet);
    const circle = h("button", { class: "circle", "data-bet": bet, title: t("bet.chip") },
      h("span", { class: "stack" }, ...slip.chipsOn(bet).map((c) => h("i", { class: `c c${Math.min(String(c).length, 6)}` }))),
      h("output", { id: `bet-${bet}`, "data-minor": String(amount), text: money(amount, currency) }));
    circle.onclick = () => { const refused = slip.add(bet, slip.selected, maxAnte); if (!refused) changed(); refuse(bet, refused); };
    circle.oncontextmenu = (e) => { e.preventDefault(); slip.takeBack(bet); changed(); };
    const back = h("button", { class: "take-back", "data-bet": bet, title: t("bet.takeBack"), "aria-label": t("bet.takeBack"), text: "−" });
    back.onclick = () => { slip.takeBack(bet); changed(); };
    const clear = h("button", { class: "clear", "data-clear": bet, text: t("bet.clear") });
    clear.onclick = () => { slip.clear(bet); changed(); };
    return h("div", { class: "spot", "data-bet": bet },
      h("label", { class: "bet-name", text: named("betname", bet) }), circle,
      h("span", { class: `limits${byDealer ? " capped" : ""}`, "data-max": String(max),
        text: t("bet.limits", { min: money(limit?.min ?? 0n, currency), max: money(max, currency) }) }),
      h("span", { class: "spot-actions" }, back, clear),
      Object.assign(h("small", { class: "spot-error", role: "alert" }), { hidden: true }));
  }));
}
