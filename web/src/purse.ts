// The wallet panel: the play-money balance, a top-up, and the responsible-gaming limits.
import { toJsonString } from "@bufbuild/protobuf";
import { wallet } from "./api";
import { $ } from "./dom";
import { GetLimitsResponseSchema } from "./gen/croupier/v1/wallet_pb";
import { money, toMinor } from "./i18n";
import { renderLimits } from "./limits";

export const CURRENCY = "PLAY";
export const key = () => `web-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 10)}`;

export function showBalance(available: bigint): void {
  $("balance").textContent = `${money(available, CURRENCY)} ${CURRENCY}`;
  $("balance").dataset.minor = String(available);
}

export async function refreshBalance(): Promise<void> {
  const { balances } = await wallet.getBalances({});
  showBalance(balances.find((b) => b.currency === CURRENCY)?.available ?? 0n);
}

export async function topUp(): Promise<void> {
  const amount = toMinor($<HTMLInputElement>("topup-amount").value, CURRENCY);
  await wallet.topUpPlayMoney({ amount: { amountMinor: amount, currency: CURRENCY }, transactionId: key() });
  await refreshBalance();
}

function limitField(id: string): bigint | undefined {
  const raw = $<HTMLInputElement>(id).value.trim();
  return raw === "" ? undefined : toMinor(raw, CURRENCY);
}

export async function setLimits(): Promise<void> {
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

export async function refreshLimits(): Promise<void> {
  const limits = await wallet.getLimits({});
  renderLimits($("limits-list"), limits.limits);
  $("limits-view").textContent = toJsonString(GetLimitsResponseSchema, limits, { prettySpaces: 1 });
}
