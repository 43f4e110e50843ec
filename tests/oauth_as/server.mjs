// A real OAuth 2.1 authorization server for tests/test_oauth.py: oidc-provider (a certified OpenID
// provider) issuing RFC 9068 JWT access tokens by the client credentials grant, for the resource a
// client names (RFC 8707). It generates its RSA signing key at start; the test never holds a key.
//
// Two issuers share that key, each on its own loopback port: the second one's tokens are valid in
// every way but their issuer. Clients 'late' and 'early' are served by a clock an hour behind and
// an hour ahead: their tokens are expired, or not yet valid, when they arrive. Prints one JSON line
// on stdout, {"issuer": ..., "other_issuer": ...}, once both listen.
import { AsyncLocalStorage } from 'node:async_hooks';
import { generateKeyPairSync, randomUUID } from 'node:crypto';
import { createServer } from 'node:http';

import Provider from 'oidc-provider';

const HOUR = 3600 * 1000;
const SKEW = { late: -HOUR, early: HOUR }; // milliseconds added to this server's clock, by client
const GROUPS = { bob: ['ops'], dan: ['ops', 'dev'] };
const CLIENTS = ['ada', 'bob', 'carol', 'dan', 'eve', 'late', 'early'];
const SCOPES = 'memory.audit';

const clock = new AsyncLocalStorage();
const realNow = Date.now;
Date.now = () => realNow() + (clock.getStore() ?? 0);

const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
const jwk = { ...privateKey.export({ format: 'jwk' }), kid: randomUUID(), alg: 'RS256', use: 'sig' };

function configuration() {
  return {
    jwks: { keys: [jwk] },
    scopes: [SCOPES],
    clients: CLIENTS.map((id) => ({
      client_id: id,
      client_secret: `${id}-secret`, // a client's password, not a signing key
      grant_types: ['client_credentials'],
      redirect_uris: [],
      response_types: [],
      scope: SCOPES,
    })),
    features: {
      devInteractions: { enabled: false },
      clientCredentials: { enabled: true },
      resourceIndicators: {
        enabled: true,
        defaultResource: () => undefined,
        useGrantedResource: () => true,
        getResourceServerInfo: (ctx, resourceIndicator) => ({
          audience: resourceIndicator,
          scope: SCOPES,
          accessTokenFormat: 'jwt',
          accessTokenTTL: 600,
          jwt: { sign: { alg: 'RS256' } },
        }),
      },
    },
    extraTokenClaims: (ctx, token) => (GROUPS[token.clientId] ? { groups: GROUPS[token.clientId] } : undefined),
  };
}

function clientOf(ctx) {
  const basic = /^Basic (.+)$/i.exec(ctx.get('authorization') || '');
  return basic ? decodeURIComponent(Buffer.from(basic[1], 'base64').toString().split(':')[0]) : undefined;
}

function listen() {
  const server = createServer();
  return new Promise((resolve) => {
    server.listen(0, '127.0.0.1', () => resolve([server, `http://127.0.0.1:${server.address().port}`]));
  });
}

const [server, issuer] = await listen();
const provider = new Provider(issuer, configuration());
provider.use((ctx, next) => clock.run(SKEW[clientOf(ctx)] ?? 0, next));
server.on('request', provider.callback());

const [otherServer, otherIssuer] = await listen();
otherServer.on('request', new Provider(otherIssuer, configuration()).callback());

process.stdout.write(`${JSON.stringify({ issuer, other_issuer: otherIssuer })}\n`);
