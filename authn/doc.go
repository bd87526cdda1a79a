// Package authn is the runtime authentication service of spec 001: the three
// modes (dev, idp, hosted), identity normalisation, tenant admission, single-
// use websocket tickets, the execution websocket with its NATS fan-out, and
// hosted provider profiles. Server serves the routes; cmd/turnledger's
// `runtime` subcommand reads the environment into a Config and wires a
// boltstore.Store (or a pgstore.Store for postgres:// URLs) and a natsbus.Bus
// into it, and serves the webclient under /app/ beside it.
//
// # Decisions where the spec says "not shown"
//
// Error bodies are internal/jsonhttp's {"error", "message"} with the names
// UnauthorizedError (401, with WWW-Authenticate: Bearer), ForbiddenError
// (403), ServiceUnavailableError (503), ValidationError (400),
// NotFoundError (404), MethodNotAllowedError (405), TooManyRequestsError
// (429, with Retry-After: failed authentication is throttled per address,
// see throttle.go) and InternalError (500).
// The 403 messages are the spec's: "tenant is not allowlisted", "tenant
// access is suspended", "tenant access has been removed".
//
// /health answers {"status":"ok"}. /ready answers {"status":"ready"|
// "unavailable","checks":{"database":…,"bus":…}} with 200 or 503.
//
// Tickets live 30 seconds (Config.TicketTTL), are "wst_" plus 32 random
// bytes in base64url, are stored as their SHA-256 only, and are taken
// (read and deleted) in one transaction. Redeeming one looks the tenant up
// again, so suspending a tenant also voids its outstanding tickets. Tickets
// are accepted in every mode (the spec lists them for hosted; they are
// strictly safer than query tokens); ws-ticket takes no body (or {}).
//
// Token rules beyond the library (token.go, credentials.go): the header
// and payload are one JSON object each, with no key twice and no key that
// differs only in letter case from a name read here (encoding/json would
// match it); exp, iat and nbf are JSON numbers in [0, MaxNumericDate]; a
// request carries exactly one credential (two Authorization headers, a
// header and a query credential, or dev debug headers and a bearer token
// are 401, never the anonymous user); key sets never follow a redirect;
// every 503 has Retry-After. Further: the algorithm is fixed per mode
// (jwt.WithValidMethods) and keys are typed (a []byte key exists only in dev
// mode), so HS256 signed with an RSA public key cannot verify; exp and iat
// are required in idp and hosted (in dev they are checked when present,
// since the spec requires only tid and oid there); iat may not be more than
// Config.Leeway (30 s) in the future; a crit header is refused; aud must be
// exactly the expected value (a one-element array counts); tokens longer
// than 8 KiB are refused. A tid must match
// ^[A-Za-z0-9](?:[A-Za-z0-9-]{0,62}[A-Za-z0-9])?$ before it goes into
// IDP_ISSUER_TEMPLATE, so it cannot add a path, dot segment, query,
// fragment, userinfo or port to the issuer URL; the same pattern applies to
// HOSTED_TENANT_CLAIM and to dev tenant ids.
//
// Key sets (KeySet): keys are cached 300 s on the injected clock and fetched
// again on expiry; an unknown kid triggers a fetch at most every 10 s
// (rotation works, forged kids cannot hammer the provider); one fetch runs at
// a time; bodies over 1 MiB, error statuses, non-JWKS bodies and sets with
// no usable key of the mode's type (RSA ≥ 2048 bits for idp, Ed25519 for
// hosted) count as unavailable. Unavailable (not configured, unreachable,
// slow past the client timeout, garbage) is 503; unknown kid is 401. A
// failed fetch is remembered for 10 s. While held keys are fresh, an
// unreachable endpoint does not affect known kids.
//
// Dev mode has no admission: tenant_id and user_id are name-based (v5)
// UUIDs of the tenant claim and of tenant+user claim, so they are stable.
// In idp and hosted modes a user is keyed by its tenant and user claim, so
// the same oid in two tenants is two users.
//
// The websocket checks, in order: the Origin (403; an http or https
// origin whose scheme, host and port equal an entry of
// CORS_ALLOWED_ORIGINS, or the request's own origin: its Host, with https
// on a TLS listener and http otherwise, unless CORS_ALLOWED_ORIGINS lists
// that host and port under the other scheme), the one credential (401/403/503; a ticket is only looked up), the
// other query parameters (400: anything but ticket, access_token,
// debug_tenant_id, debug_user_id and session_id, and so workspace_id and
// user_id; session_id is optional and 1 to 64 of [A-Za-z0-9_-]), the
// handshake (426 in the JSON shape), the bus; only then is a ticket taken,
// so a refused dial never spends one and of two racing dials one wins.
// Without session_id the server draws one and sends
// {"kind":"session","session_id":…} as the first message. A socket
// subscribes to runtime.sessions.<tenant_id>.<session_id> before the
// 101 is sent; every message a client sends (a JSON object of at most
// 64 KiB, without workspace_id or user_id — otherwise a ValidationError
// frame comes back and nothing is published) is published there, and every
// socket of that tenant and session, on any runtime process sharing the
// NATS server, receives it, the sender included. A socket that falls 64
// messages behind is closed with 1008.
//
// Provider profiles (hosted mode only) are at /api/v1/provider-profiles:
// GET (list), GET/PUT/DELETE /{provider}. The api_key is write-only, sealed
// with AES-256-GCM under SECRET_ENCRYPTION_KEY (standard base64 of 32
// bytes) with the tenant, user and provider as additional data; responses
// show has_api_key and, for keys of 16 characters or more, the last four.
// Without SECRET_ENCRYPTION_KEY the routes answer 503.
//
// Tenant statuses move active ⇄ suspended and active|suspended → deleted;
// deleted is final. Plans are 1 to 32 of [a-z0-9_-] (default "standard").
package authn
