/** A request the service refused: the HTTP status and the error body `{error, message}`. */
export class TurnledgerError extends Error {
  /** HTTP status */
  readonly status: number;
  /** the service's error name, e.g. "ConflictError" */
  readonly error: string;
  /** seconds of the service's Retry-After (sent with 503 and 429), or undefined */
  readonly retryAfterS: number | undefined;

  constructor(status: number, error: string, message: string, retryAfterS?: number) {
    super(message);
    this.status = status;
    this.error = error;
    this.retryAfterS = retryAfterS;
    this.name = error || "TurnledgerError";
  }

  override toString(): string {
    return `turnledger: ${this.status} ${this.error}: ${this.message}`;
  }
}

/** 401: missing, wrong, expired or revoked credentials. */
export class UnauthorizedError extends TurnledgerError {}
/** 403: the caller may not do this. */
export class ForbiddenError extends TurnledgerError {}
/** 404: no such project, agent, Turn or credential. */
export class NotFoundError extends TurnledgerError {}
/** 409: the state does not allow it. */
export class ConflictError extends TurnledgerError {}
/** 409: the claim is not (or no longer) the live one of the Turn. */
export class FencingError extends TurnledgerError {}
/** 422: an invariant refuses the request. */
export class InvariantError extends TurnledgerError {}
/** 422: the request is malformed. */
export class ValidationError extends TurnledgerError {}
/** 429: throttled; see retryAfterS. */
export class TooManyRequestsError extends TurnledgerError {}
/** 503: the service cannot answer now; retry after retryAfterS. */
export class UnavailableError extends TurnledgerError {}
/** 500: an unexpected failure of the service. */
export class InternalError extends TurnledgerError {}

const byName: Record<string, typeof TurnledgerError> = {
  UnauthorizedError,
  ForbiddenError,
  NotFoundError,
  ConflictError,
  FencingError,
  InvariantError,
  ValidationError,
  TooManyRequestsError,
  ServiceUnavailableError: UnavailableError,
  InternalError,
};

const byStatus: Record<number, typeof TurnledgerError> = {
  401: UnauthorizedError,
  403: ForbiddenError,
  404: NotFoundError,
  429: TooManyRequestsError,
  500: InternalError,
  503: UnavailableError,
};

const statusOfName: Record<string, number> = {
  UnauthorizedError: 401,
  ForbiddenError: 403,
  NotFoundError: 404,
  ConflictError: 409,
  FencingError: 409,
  InvariantError: 422,
  ValidationError: 422,
  TooManyRequestsError: 429,
  ServiceUnavailableError: 503,
  InternalError: 500,
};

export function makeError(status: number, error: string, message: string, retryAfterS?: number): TurnledgerError {
  const C = byName[error] ?? byStatus[status] ?? TurnledgerError;
  return new C(status, error, message, retryAfterS);
}

/** Reads Retry-After: delay-seconds or an HTTP date. */
export function parseRetryAfter(v: string | null): number | undefined {
  if (!v) return undefined;
  if (/^\d+$/.test(v.trim())) {
    const n = Number(v);
    return n > 0 ? n : undefined;
  }
  const t = Date.parse(v);
  return Number.isNaN(t) ? undefined : Math.max((t - Date.now()) / 1000, 0);
}

/** Decodes an error answer; a body that is not the error shape still gives an error with the status. */
export function errorFrom(status: number, body: string, retryAfter: string | null): TurnledgerError {
  let name = "";
  let message = "";
  try {
    const v = JSON.parse(body);
    if (v && typeof v.error === "string") {
      name = v.error;
      message = String(v.message ?? "");
    }
  } catch {
    // not JSON
  }
  if (!name) {
    name = `HTTP ${status}`;
    message = body.length > 200 ? body.slice(0, 200) + "…" : body;
  }
  return makeError(status, name, message, parseRetryAfter(retryAfter));
}

/** The error of an `event: error` inside a stream, with the status a page would have answered. */
export function errorOfEvent(data: string): TurnledgerError {
  let name = "StreamError";
  let message = data;
  try {
    const v = JSON.parse(data);
    if (v && v.error) {
      name = String(v.error);
      message = String(v.message ?? "");
    }
  } catch {
    // not JSON
  }
  return makeError(statusOfName[name] ?? 400, name, message);
}

/** Thrown by a worker's handler to ask for another attempt: the Turn is finished as failed with `retry: true`. */
export class Retry extends Error {
  constructor(message = "retry later") {
    super(message);
    this.name = "Retry";
  }
}

/** Why a job was cancelled. */
export type CancelCause = "stop_requested" | "claim_lost" | "shutdown";

/** The reason of an aborted `job.signal`, and what `job.throwIfCancelled()` throws. */
export class Cancelled extends Error {
  override readonly cause: CancelCause;
  constructor(cause: CancelCause) {
    super(`turnledger: job cancelled: ${cause}`);
    this.name = "Cancelled";
    this.cause = cause;
  }
}

function transient(status: number): boolean {
  return status >= 500 || status === 408 || status === 429;
}

/**
 * Whether a call that failed with err may be sent again with the same
 * Idempotency-Key: its answer was lost (a network error) or the service was
 * unavailable or shedding load (429, 502, 503, 504). An abort is not.
 */
export function retryable(err: unknown): boolean {
  if (err instanceof TurnledgerError) return [429, 502, 503, 504].includes(err.status);
  if (err instanceof Error && (err.name === "AbortError" || err.name === "TimeoutError")) return false;
  return err instanceof Error;
}

/** Whether the service answered with a refusal that asking again would not change (not a 5xx, 408 or 429). */
export function refusedForGood(err: unknown): boolean {
  return err instanceof TurnledgerError && !transient(err.status);
}
