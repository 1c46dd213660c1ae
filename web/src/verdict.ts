// The fairness verdict on the page: a round's checks as the verifier (fairness.ts) reported them, and the
// wait for the shoe's reveal, which the shuffler publishes a moment after the settlement.
import { tables } from "./api";
import { h } from "./dom";
import type * as fairness from "./fairness";
import type { RoundView } from "./gen/croupier/v1/table_pb";
import { t } from "./i18n";

const REVEAL_POLLS = 50;
const REVEAL_POLL_MS = 200;

export function renderReport(container: HTMLElement, report: fairness.Report, title: string): void {
  container.dataset.state = report.ok ? "ok" : "failed";
  container.replaceChildren(
    h("strong", { class: report.ok ? "pass" : "fail", text: `${title}: ${t(report.ok ? "verify.ok" : "verify.failed")}` }),
    h("ul", {}, ...report.checks.map((c) => h("li", { class: c.passed ? "pass" : "fail", "data-check": c.name, dir: "ltr", text: `${c.passed ? "✔" : "✘"} ${c.name}: ${c.reason}` }))),
    h("small", { text: t("verify.note") }),
  );
}

/** The round once its shoe is revealed (GetRound polled for up to 10 s), or as last read if it is not yet. */
export async function revealed(roundId: string): Promise<RoundView> {
  let view = (await tables.getRound({ roundId })).round!;
  for (let i = 0; i < REVEAL_POLLS && !view.revealedSalt; i++) {
    await new Promise((r) => setTimeout(r, REVEAL_POLL_MS));
    view = (await tables.getRound({ roundId })).round!;
  }
  return view;
}
