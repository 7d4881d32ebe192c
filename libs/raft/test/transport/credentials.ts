// The credentials the transport tests run with: kcm's own, from the one module that
// decides them (@kcm/agent-api), so the tests exercise what a manager runs.

import { channelCredentials, serverCredentials } from '@kcm/agent-api';

export const testCredentials = { channelCredentials: channelCredentials(), serverCredentials: serverCredentials() };
