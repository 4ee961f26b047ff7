//! A TCP proxy in front of the runtime whose connections the test can cut
//! (TCP reset on both sides, as when a phone loses its network) and whose
//! listener can refuse new connections until the network is "back".

import { connect, createServer, type Server, type Socket } from "node:net";

export class CutProxy {
  private pairs = new Set<[Socket, Socket]>();
  private down = false;

  private constructor(
    private readonly server: Server,
    readonly port: number,
  ) {}

  static start(targetPort: number): Promise<CutProxy> {
    return new Promise((res, rej) => {
      let proxy: CutProxy;
      const server = createServer((client) => {
        if (proxy.down) {
          client.resetAndDestroy();
          return;
        }
        const upstream = connect(targetPort, "127.0.0.1");
        const pair: [Socket, Socket] = [client, upstream];
        proxy.pairs.add(pair);
        const drop = () => {
          proxy.pairs.delete(pair);
          client.destroy();
          upstream.destroy();
        };
        client.on("error", drop).on("close", drop);
        upstream.on("error", drop).on("close", drop);
        client.pipe(upstream);
        upstream.pipe(client);
      });
      server.once("error", rej);
      server.listen(0, "127.0.0.1", () => {
        const addr = server.address();
        proxy = new CutProxy(server, typeof addr === "object" && addr ? addr.port : 0);
        res(proxy);
      });
    });
  }

  get origin(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  /** The network goes away: every open connection is reset, new ones are refused. */
  cut(): void {
    this.down = true;
    for (const [client, upstream] of this.pairs) {
      client.resetAndDestroy();
      upstream.resetAndDestroy();
    }
    this.pairs.clear();
  }

  restore(): void {
    this.down = false;
  }

  close(): Promise<void> {
    this.cut();
    return new Promise((r) => this.server.close(() => r()));
  }
}
