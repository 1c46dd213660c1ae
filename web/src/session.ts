// The sign-in and the seat, kept in the tab's sessionStorage: a reload (or a crash of the page) comes
// back signed in, at the same seat, with the round in progress (issue 25, resume). Another device signs
// in with the same name and sits at the same table: JoinTable gives the same seat back.

export interface Session {
  token: string;
  player: string;
  seatId?: string;
  tableId?: string;
  role?: string;
}

const KEY = "croupier.session";

export function loadSession(): Session | undefined {
  try {
    const saved = JSON.parse(sessionStorage.getItem(KEY) ?? "null") as Session | null;
    return saved && typeof saved.token === "string" && saved.token ? saved : undefined;
  } catch {
    return undefined;
  }
}

export function saveSession(session: Session | undefined): void {
  if (session) sessionStorage.setItem(KEY, JSON.stringify(session));
  else sessionStorage.removeItem(KEY);
}
