/**
 * @turnledger/client — the TypeScript client of the turnledger coordination
 * API: no runtime dependency (the global fetch), for Node ≥ 20 and browsers.
 * `Client` has one method per route (the OpenAPI operationIds), `Worker`
 * claims an agent's Turns and runs a handler for each, `client.follow()`
 * iterates over a feed's event stream and resumes after a broken connection.
 */
export { Client, Feed, IDEMPOTENCY_HEADER, bodyFields, newIdempotencyKey, queryFields, sleep } from "./client.js";
export type {
  AgentOptions, CallOptions, ClientOptions, DispatchOptions, FeedQuery, FencedOptions, FinishOptions, KeyOptions,
  MutateOptions, ProjectOptions, RequestedByOptions, BulkOptions, Time,
} from "./client.js";
export {
  Cancelled, ConflictError, FencingError, ForbiddenError, InternalError, InvariantError, NotFoundError, Retry,
  TooManyRequestsError, TurnledgerError, UnauthorizedError, UnavailableError, ValidationError, refusedForGood, retryable,
} from "./errors.js";
export type { CancelCause } from "./errors.js";
export { Job, Result, Worker, retryKeyed } from "./worker.js";
export type { Handler, Logger, WorkerOptions } from "./worker.js";
export type * from "./types.js";
