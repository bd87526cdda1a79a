package projection

import "encoding/binary"

// Bucket names. The layout of each is in the package doc.
var (
	bktMeta       = []byte("meta")
	bktTurns      = []byte("turns")
	bktByDispatch = []byte("turns_by_dispatch")
	bktByTarget   = []byte("turns_by_target")
	bktByState    = []byte("turns_by_state")
	bktByAgent    = []byte("turns_by_agent")
	bktChildren   = []byte("turn_children")
	bktByTag      = []byte("turns_by_tag")
	bktContext    = []byte("context")
	bktFeed       = []byte("feed")
	bktTurnFeed   = []byte("turn_feed")
	bktAgentFeed  = []byte("agent_feed")
	bktAgents     = []byte("agents")
	bktSeen       = []byte("agent_seen")
	bktClaims     = []byte("agent_claims")
	bktQueued     = []byte("queued")
	bktOffers     = []byte("offers")
	bktCreds      = []byte("credentials")
	bktSnapshots  = []byte("snapshots") // the engine's, not a projection (snapshots.go)

	allBuckets = [][]byte{
		bktMeta, bktTurns, bktByDispatch, bktByTarget, bktByState, bktByAgent, bktChildren, bktByTag,
		bktContext, bktFeed, bktTurnFeed, bktAgentFeed, bktAgents, bktSeen,
		bktClaims, bktQueued, bktOffers, bktCreds, bktSnapshots,
	}

	keyCheckpoint = []byte("checkpoint")
	keySchema     = []byte("schema")
	keyUnsynced   = []byte("unsynced_boot") // the boot a file is written under without fsync (durability.go)
)

// A key is a tuple of parts. A string part is its bytes with every 0x00
// written as 0x00 0xFF, followed by the terminator 0x00 0x00; a sequence part
// is 8 bytes big-endian. The encoding keeps tuple order (a string sorts before
// any longer string it is a prefix of) and makes the encoding of a tuple's
// first parts a prefix of exactly the keys that start with those parts, so
// "project a" never leaks into "project ab".

func appendStr(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if s[i] == 0 {
			b = append(b, 0, 0xFF)
			continue
		}
		b = append(b, s[i])
	}
	return append(b, 0, 0)
}

func appendSeq(b []byte, n uint64) []byte {
	return binary.BigEndian.AppendUint64(b, n)
}

// key builds a key of string parts.
func key(parts ...string) []byte {
	n := 0
	for _, p := range parts {
		n += len(p) + 2
	}
	b := make([]byte, 0, n+8)
	for _, p := range parts {
		b = appendStr(b, p)
	}
	return b
}

// seqKey builds a key of string parts followed by a sequence.
func seqKey(seq uint64, parts ...string) []byte {
	return appendSeq(key(parts...), seq)
}

// tailSeq reads the sequence at the end of a key.
func tailSeq(k []byte) uint64 {
	if len(k) < 8 {
		return 0
	}
	return binary.BigEndian.Uint64(k[len(k)-8:])
}

func putU64(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }

func getU64(v []byte) uint64 {
	if len(v) != 8 {
		return 0
	}
	return binary.BigEndian.Uint64(v)
}
