// The Connect clients of the public services, generated from proto/ (src/gen), on the page's own origin.
import { BinaryReader } from "@bufbuild/protobuf/wire";
import { Code, ConnectError, createClient, type Interceptor } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-web";
import { TableService } from "./gen/croupier/v1/table_pb";
import { WalletService } from "./gen/croupier/v1/wallet_pb";

let token = "";

export function setToken(value: string): void {
  token = value;
}

const bearer: Interceptor = (next) => async (req) => {
  if (token) req.header.set("authorization", `Bearer ${token}`);
  return next(req);
};

const transport = createConnectTransport({ baseUrl: location.origin, interceptors: [bearer] });
export const tables = createClient(TableService, transport);
export const wallet = createClient(WalletService, transport);

/** The dev-mode login of the embedded server: it mints a play-money player's token (404 elsewhere). */
export async function devLogin(player: string): Promise<string> {
  const response = await fetch("/dev/login", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ player }) });
  const body = await response.json().catch(() => ({}));
  if (response.status === 404) throw new Error("no dev login on this server: paste a token minted by the operator");
  if (!response.ok) throw new Error(body.message ?? `login refused (${response.status})`);
  return body.token as string;
}

const ERROR_INFO = "google.rpc.ErrorInfo";

/** google.rpc.ErrorInfo's reason (field 1), read from the error's details when the server sent one. */
function reasonOf(error: ConnectError): string {
  for (const detail of error.details) {
    if (!("type" in detail) || detail.type !== ERROR_INFO || !(detail.value instanceof Uint8Array)) continue;
    const reader = new BinaryReader(detail.value);
    while (reader.pos < reader.len) {
      const [field, wireType] = reader.tag();
      if (field === 1) return reader.string();
      reader.skip(wireType);
    }
  }
  return "";
}

/** What the page shows for a failed call: the server's code and message, and its reason when given. */
export function describeError(error: unknown): string {
  if (error instanceof ConnectError) {
    const reason = reasonOf(error);
    return `${Code[error.code]}: ${error.rawMessage}${reason ? ` [${reason}]` : ""}`;
  }
  return error instanceof Error ? error.message : String(error);
}
