// Waits for a gRPC channel to connect, and gives up as soon as a connection attempt
// fails, so a down peer is reported unreachable at once instead of after a long timeout.
// (grpc-js's own Client.waitForReady waits out its whole deadline through failures.)

import * as grpc from '@grpc/grpc-js';

const { READY, CONNECTING, TRANSIENT_FAILURE, SHUTDOWN } = grpc.connectivityState;

/** True once READY; false when an attempt fails, the channel closes, or timeoutMs pass. */
export function awaitChannelReady(client: grpc.Client, timeoutMs: number): Promise<boolean> {
  return new Promise((resolve) => {
    const channel = client.getChannel();
    const deadline = Date.now() + timeoutMs;
    let attempted = false;
    const check = (timedOut: boolean): void => {
      let state: grpc.connectivityState;
      try {
        state = channel.getConnectivityState(true); // true: an IDLE channel starts connecting
      } catch {
        return resolve(false); // closed
      }
      if (state === READY) return resolve(true);
      if (state === SHUTDOWN || timedOut) return resolve(false);
      if (state === CONNECTING) attempted = true;
      // A failure left over from before this wait is not news: wait for the channel's own
      // reconnect backoff to end and the next attempt to finish.
      if (state === TRANSIENT_FAILURE && attempted) return resolve(false);
      try {
        channel.watchConnectivityState(state, deadline, (err?: Error) => check(err !== undefined));
      } catch {
        resolve(false);
      }
    };
    check(false);
  });
}
