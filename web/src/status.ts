// The seat's boxes (the seed's "text boxes"): the house's tables need no dealer's figures; a war-p2p
// seat shows its side's. Each box keeps the server's raw figure in data-value beside the formatted text.
import { h } from "./dom";
import type { SeatStatus } from "./gen/croupier/v1/table_pb";
import { money, named, t } from "./i18n";

const HOUSE_FIELDS: (keyof SeatStatus)[] = ["lastRoundPhase", "lastRoundResult"];
const P2P_FIELDS: Record<string, (keyof SeatStatus)[]> = {
  player: ["role", "opponentNickname", "maxAnte", "lastRoundPhase", "lastRoundResult", "lastRoundCommission", "dealerPoints"],
  dealer: ["role", "opponentNickname", "lastRoundPhase", "lastRoundResult", "commissionPaidLastRound", "dealerPoints", "confirmed", "autoConfirm"],
};
const MONEY_FIELDS = new Set<keyof SeatStatus>(["lastRoundResult", "lastRoundCommission", "commissionPaidLastRound", "balance", "maxAnte"]);

function statusText(status: SeatStatus, field: keyof SeatStatus): string {
  const value = status[field];
  if (MONEY_FIELDS.has(field)) return money(value as bigint, status.currency, field === "lastRoundResult");
  if (typeof value === "boolean") return t(value ? "yes" : "no");
  if (field === "role") return named("role", String(value));
  if (field === "lastRoundPhase") return value ? named("phase", String(value)) : "—";
  if (field === "opponentNickname" && value === "house") return t("house");
  return String(value ?? "");
}

export function renderStatusBoxes(container: HTMLElement, game: string, role: string, status: SeatStatus | undefined): void {
  const fields = game === "war-p2p" ? P2P_FIELDS[role] ?? [] : HOUSE_FIELDS;
  container.replaceChildren(...(status ? fields.map((field) => h("div", { class: "box" },
    h("label", { text: t(`status.${field}`) }),
    h("output", { "data-field": String(field), "data-value": String(status[field] ?? ""), text: statusText(status, field) }))) : []));
}
