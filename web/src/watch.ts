// WatchSeat, kept open while the page holds a seat: it is the player's presence at the table, and
// how the page hears of a pairing, a confirmation, the next commitment and every step of the rounds
// at the seat (a dealer's included). A dropped stream resumes from the last position received, so
// nothing is missed or seen twice.
import { Code, ConnectError } from "@connectrpc/connect";
import { tables } from "./api";
import type { WatchSeatResponse } from "./gen/croupier/v1/table_pb";

const RETRY_MS = 300;

export class SeatWatch {
  /** Positions received, in order (the browser tests check a reconnect misses and repeats nothing). */
  readonly positions: string[] = [];
  private position = "";
  private controller = new AbortController();
  private stopped = false;
  private paused: Promise<void> | undefined;
  private resumeNow: (() => void) | undefined;

  constructor(
    private readonly seatId: string,
    private readonly onMessage: (message: WatchSeatResponse) => void,
    private readonly onTrouble: (error: unknown) => void,
  ) {
    void this.run();
  }

  private async run(): Promise<void> {
    while (!this.stopped) {
      if (this.paused) await this.paused;
      this.controller = new AbortController();
      try {
        for await (const message of tables.watchSeat({ seatId: this.seatId, afterPosition: this.position }, { signal: this.controller.signal })) {
          this.position = message.position;
          this.positions.push(message.position);
          this.onMessage(message);
          if (message.event.case === "seatEnded") this.stopped = true;
        }
      } catch (error) {
        const dropped = error instanceof ConnectError && error.code === Code.Canceled;
        if (!dropped && !this.stopped) this.onTrouble(error);
      }
      if (!this.stopped) await new Promise((r) => setTimeout(r, RETRY_MS));
    }
  }

  /** Drop the stream, as a lost connection would; it comes back by itself unless paused. */
  drop(): void {
    this.controller.abort();
  }

  /** Drop it and stay away until resume() (the browser tests' reconnect). */
  pause(): void {
    this.paused ??= new Promise((resolve) => (this.resumeNow = resolve));
    this.drop();
  }

  resume(): void {
    this.resumeNow?.();
    this.paused = undefined;
  }

  stop(): void {
    this.stopped = true;
    this.resume();
    this.drop();
  }
}
