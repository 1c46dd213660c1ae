// The responsible-gaming limits as people read them: each limit in the currency's units, what is used
// of it today, a raise waiting out its cooling-off, and the self-exclusion.
import { h } from "./dom";
import type { LimitAmount, PlayerLimits } from "./gen/croupier/v1/wallet_pb";
import { money, t } from "./i18n";

function amountText(limit: LimitAmount | undefined, currency: string): string {
  if (!limit || (!limit.amount && !limit.changePending)) return t("limits.none");
  const now = limit.amount ? money(limit.amount, currency) : t("limits.none");
  if (!limit.changePending) return now;
  const next = limit.pendingAmount ? money(limit.pendingAmount, currency) : t("limits.none");
  return `${now} ${t("limits.pending", { amount: next, at: new Date(limit.pendingEffectiveAt).toLocaleString() })}`;
}

export function renderLimits(container: HTMLElement, limits: PlayerLimits | undefined): void {
  const rows: HTMLElement[] = [];
  for (const c of limits?.currencies ?? []) {
    const line = (key: string, text: string) => h("li", { "data-limit": key, "data-currency": c.currency }, `${t(`limits.${key}`)} (${c.currency}): `, h("strong", { text }));
    rows.push(
      line("maxStake", amountText(c.maxStake, c.currency)),
      line("dailyWager", `${amountText(c.dailyWager, c.currency)} — ${t("limits.today", { amount: money(c.wageredToday, c.currency) })}`),
      line("dailyLoss", `${amountText(c.dailyLoss, c.currency)} — ${t("limits.today", { amount: money(c.netLossToday, c.currency) })}`),
    );
  }
  const until = limits?.selfExclusion?.until;
  if (until) rows.push(h("li", { "data-limit": "excludeUntil" }, `${t("limits.excludeUntil")}: `, h("strong", { text: new Date(until).toLocaleString() })));
  container.replaceChildren(...rows);
}
