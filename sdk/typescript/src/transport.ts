// The gRPC transport: @connectrpc/connect-node's gRPC protocol over HTTP/2.
import type { Transport } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import type { SecureClientSessionOptions } from "node:http2";

/** TLS for a server that serves it (`tickwheel serve --tls-cert ...`). */
export interface TlsOptions {
  /** PEM of the CA that signed the server's certificate (default: the system's). */
  ca?: string | Buffer;
  /** Client certificate and key for mutual TLS. */
  cert?: string | Buffer;
  key?: string | Buffer;
  /** The name the certificate is checked against (default: the target's host). */
  serverName?: string;
}

/** A transport to `target` (`host:port`). */
export function openTransport(target: string, tls?: TlsOptions | boolean): Transport {
  const secure = tls !== undefined && tls !== false;
  const opts: TlsOptions = typeof tls === "object" ? tls : {};
  const nodeOptions: SecureClientSessionOptions | undefined = secure
    ? { ca: opts.ca, cert: opts.cert, key: opts.key, servername: opts.serverName }
    : undefined;
  return createGrpcTransport({
    baseUrl: `${secure ? "https" : "http"}://${target}`,
    nodeOptions,
    pingIntervalMs: 10_000,
    pingTimeoutMs: 10_000,
  });
}
