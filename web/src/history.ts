// Past rounds: the list (each side's own result: a dealer's line is the dealer's net, not the player's)
// and one round recalled step by step, the cards dealt up to the step and who caused it.
import { $, h, shortRef } from "./dom";
import type { RoundView } from "./gen/croupier/v1/table_pb";
import { money, named, t } from "./i18n";
import { renderCards } from "./round";

export function renderHistory(container: HTMLElement, rounds: readonly RoundView[], recall: (roundId: string) => void): void {
  container.replaceChildren(...rounds.map((r) => {
    const net = r.role === "dealer" ? r.dealerNet : r.totalReturned - r.totalStaked;
    const label = `${named("game", r.game)} ${shortRef(r.roundId)}${r.role === "dealer" ? ` (${named("role", "dealer")})` : ""} — ${named("phase", r.phase)}, ${money(net, r.currency, true)}`;
    const button = h("button", { class: "recall", title: r.roundId, text: label });
    button.addEventListener("click", () => recall(r.roundId));
    return h("li", { "data-round": r.roundId, "data-net": String(net) }, button);
  }));
}

export function renderRecall(view: RoundView | undefined, step: number): void {
  if (!view) return;
  const shown = view.steps.slice(0, step + 1);
  const s = view.steps[step];
  $("recall-title").textContent = t("recall.title", { ref: shortRef(view.roundId), game: named("game", view.game), step: step + 1, steps: view.steps.length });
  const by = s?.causedBy ? `\n${t("recall.by", { reason: s.causedByReason })}` : "";
  $("recall-step").textContent = s ? `v${s.version} ${s.eventType} ${s.occurredAt}${by}\n${JSON.stringify(JSON.parse(s.payloadJson || "{}"), null, 1)}` : "";
  $("recall-step").dataset.event = s?.eventType ?? "";
  $("recall-step").dataset.causedBy = s?.causedBy ?? "";
  // Cards dealt up to this step, from the CardsDealt steps shown so far.
  const dealt = shown.filter((x) => x.eventType === "CardsDealt").flatMap((x) => (JSON.parse(x.payloadJson).cards ?? []) as { card?: string; hand: string; face_up?: boolean; position?: number }[]);
  renderCards($("recall-cards"), dealt.map((c) => ({ card: c.card ?? "", hand: c.hand, faceUp: Boolean(c.face_up), position: c.position ?? -1 })));
  $<HTMLButtonElement>("recall-prev").disabled = step === 0;
  $<HTMLButtonElement>("recall-next").disabled = step >= view.steps.length - 1;
}
