// A real authorization server for the gateway's identity tests: npm's
// oidc-provider (OpenID-certified), started on loopback by the tests.
//
// What it is configured with (all from the environment, set by the test):
// - CLIENTS: JSON array of oidc-provider client metadata (the caller's
//   agent, the gateway).
// - RESOURCES: JSON object, resource URL -> { scope, exchange_audience?,
//   ttl? }: the resource servers it issues JWT access tokens for (RFC
//   8707). An `exchange_audience` makes its token exchange misconfigured:
//   it issues tokens for that audience instead of the resource.
// - DENY: space-separated subjects the token exchange refuses (the
//   authorization server's policy: they lack access to every resource).
// - SKEW_SECONDS: how far its clock is from the machine's (clock skew).
// - PORT: where to listen (default: a free port). With KEY_FILE, a restart
//   on the same port is the same issuer with the same key, having
//   forgotten every grant and refresh token (its store is in memory): the
//   tests' way of revoking them all.
// - KEY_FILE: where its signing key is kept (made on first start).
//
// Token exchange (RFC 8693) is a grant type oidc-provider lets a deployment
// register: the handler below verifies the subject token as an access
// token this server issued (signature, issuer, expiry), applies the policy,
// narrows the scope to what the resource offers, and issues a JWT access
// token for the requested resource. It prints its issuer URL on stdout
// once it listens.

import fs from 'node:fs';
import http from 'node:http';
import * as jose from 'jose';
import Provider, { errors } from 'oidc-provider';

const skew = Number(process.env.SKEW_SECONDS || 0);
if (skew) {
  const now = Date.now.bind(Date);
  Date.now = () => now() + skew * 1000;
}

const clients = JSON.parse(process.env.CLIENTS || '[]');
const resources = JSON.parse(process.env.RESOURCES || '{}');
const deny = new Set((process.env.DENY || '').split(' ').filter(Boolean));

const EXCHANGE = 'urn:ietf:params:oauth:grant-type:token-exchange';
const ACCESS_TOKEN = 'urn:ietf:params:oauth:token-type:access_token';

const server = http.createServer();
await new Promise((ready) => server.listen(Number(process.env.PORT || 0), '127.0.0.1', ready));
const issuer = `http://127.0.0.1:${server.address().port}`;

async function signingKey() {
  const file = process.env.KEY_FILE;
  if (file && fs.existsSync(file)) return JSON.parse(fs.readFileSync(file, 'utf8'));
  const { privateKey } = await jose.generateKeyPair('ES256', { extractable: true });
  const made = { ...(await jose.exportJWK(privateKey)), kid: 'k1', alg: 'ES256', use: 'sig' };
  if (file) fs.writeFileSync(file, JSON.stringify(made), { mode: 0o600 });
  return made;
}
const jwk = await signingKey();

function resourceInfo(indicator, exchange = false) {
  const info = resources[indicator];
  if (!info) throw new errors.InvalidTarget(`unknown resource ${indicator}`);
  return {
    scope: info.scope,
    audience: (exchange && info.exchange_audience) || indicator,
    accessTokenTTL: info.ttl || 600,
    accessTokenFormat: 'jwt',
    jwt: { sign: { alg: 'ES256' } },
  };
}

const provider = new Provider(issuer, {
  clients,
  jwks: { keys: [jwk] },
  clientDefaults: { id_token_signed_response_alg: 'ES256' },
  findAccount: (ctx, id) => ({ accountId: id, claims: () => ({ sub: id }) }),
  features: {
    devInteractions: { enabled: true },
    clientCredentials: { enabled: true },
    revocation: { enabled: true },
    // The upstreams in these tests (toolgate servers) take Bearer tokens.
    dPoP: { enabled: false },
    resourceIndicators: {
      enabled: true,
      defaultResource: () => undefined,
      useGrantedResource: () => true,
      getResourceServerInfo: (ctx, indicator) => resourceInfo(indicator),
    },
  },
  scopes: ['openid', 'offline_access'],
  pkce: { required: () => true },
  issueRefreshToken: (ctx, client) => client.grantTypeAllowed('refresh_token'),
  ttl: { RefreshToken: 3600, Grant: 3600, Session: 3600, Interaction: 600 },
  loadExistingGrant: async (ctx) => {
    // Consent once per client and person; the test's consent screen is
    // the dev interaction's.
    const grantId = ctx.oidc.result?.consent?.grantId
      || ctx.oidc.session.grantIdFor(ctx.oidc.client.clientId);
    return grantId ? ctx.oidc.provider.Grant.find(grantId) : undefined;
  },
});
provider.proxy = false;

const keys = jose.createLocalJWKSet({ keys: [{ ...jwk, d: undefined }] });

provider.registerGrantType(EXCHANGE, async (ctx) => {
  const { params, client } = ctx.oidc;
  if (params.subject_token_type !== ACCESS_TOKEN) {
    throw new errors.InvalidRequest('subject_token_type must be an access token');
  }
  if (params.requested_token_type && params.requested_token_type !== ACCESS_TOKEN) {
    throw new errors.InvalidRequest('only access tokens are issued');
  }
  let claims;
  try {
    ({ payload: claims } = await jose.jwtVerify(params.subject_token, keys, {
      issuer,
      currentDate: new Date(Date.now()),
    }));
  } catch (e) {
    throw new errors.InvalidGrant(`subject_token is not valid (${e.code || 'invalid'})`);
  }
  if (deny.has(claims.sub)) {
    throw new errors.AccessDenied('the subject has no access to that resource');
  }
  const info = resourceInfo(params.resource, true);
  const offered = new Set(info.scope.split(' '));
  const asked = (params.scope || '').split(' ').filter(Boolean);
  const scope = asked.filter((s) => offered.has(s)).join(' ');
  const resourceServer = new ctx.oidc.provider.ResourceServer(params.resource, info);
  const token = new ctx.oidc.provider.AccessToken({
    accountId: claims.sub,
    client,
    gty: EXCHANGE,
    scope: scope || undefined,
    resourceServer,
  });
  const value = await token.save();
  ctx.body = {
    access_token: value,
    issued_token_type: ACCESS_TOKEN,
    token_type: 'Bearer',
    expires_in: token.expiration,
    scope: scope || undefined,
  };
}, ['subject_token', 'subject_token_type', 'requested_token_type', 'resource', 'scope', 'audience', 'actor_token', 'actor_token_type']);

server.on('request', provider.callback());
process.stdout.write(`${issuer}\n`);
