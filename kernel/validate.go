package kernel

import (
	"bytes"
	"encoding/json"
	"regexp"
	"unicode/utf8"
)

// Bounds on what a request may carry. The HTTP layer bounds whole bodies; these
// bound the fields the kernel keeps.
const (
	MaxMetadataBytes = 16 << 10  // public_metadata
	MaxPayloadBytes  = 256 << 10 // input, record payloads, final payloads
	MaxTextLen       = 2000      // descriptions, summaries, notes
	MaxCapacity      = 10000
	MaxListItems     = 64 // capabilities, grants
	MaxReportRecords = 1000
)

// namePattern is the shape of turn kinds, roles and capabilities: printable,
// no spaces, at most 128 characters.
var namePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:/-]{0,127}$`)

// keyPattern is the shape of dispatch keys and request ids: printable ASCII
// without spaces, at most 200 characters.
var keyPattern = regexp.MustCompile(`^[\x21-\x7e]{1,200}$`)

// ValidName reports whether s may be a turn kind, role or capability.
func ValidName(s string) bool { return namePattern.MatchString(s) }

func invalid(format string, args ...any) *Error { return Errorf(Validation, format, args...) }

// isObject reports whether raw is a JSON object.
func isObject(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) > 0 && raw[0] == '{' && json.Valid(raw)
}

// IsNull reports whether raw is absent or JSON null.
func IsNull(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) == 0 || string(raw) == "null"
}

// objectField checks that raw is a JSON object of at most max bytes.
func objectField(name string, raw json.RawMessage, max int) error {
	if !isObject(raw) {
		return invalid("%s must be a JSON object", name)
	}
	if len(raw) > max {
		return invalid("%s is larger than %d bytes", name, max)
	}
	return nil
}

func textField(name, s string, max int, required bool) error {
	switch {
	case required && s == "":
		return invalid("%s is required", name)
	case !utf8.ValidString(s):
		return invalid("%s must be valid UTF-8", name)
	case utf8.RuneCountInString(s) > max:
		return invalid("%s is longer than %d characters", name, max)
	}
	return nil
}

func validateCommon(c Common) error {
	if m := c.Meta; m != nil {
		if err := textField("meta.note", m.Note, MaxTextLen, false); err != nil {
			return err
		}
		if err := textField("meta.reason", m.Reason, MaxTextLen, false); err != nil {
			return err
		}
		if !IsNull(m.Annotations) {
			if err := objectField("meta.annotations", m.Annotations, MaxMetadataBytes); err != nil {
				return err
			}
		}
	}
	if t := c.Trace; t != nil {
		if err := textField("trace.trace_id", t.TraceID, 200, false); err != nil {
			return err
		}
		if t.ParentTraceID != nil {
			if err := textField("trace.parent_trace_id", *t.ParentTraceID, 200, false); err != nil {
				return err
			}
		}
		if t.RecursionDepth != nil && (*t.RecursionDepth < 0 || *t.RecursionDepth > 1000) {
			return invalid("trace.recursion_depth must be between 0 and 1000")
		}
	}
	return nil
}

func validateSpec(s AgentSpec) error {
	if !ValidID(s.AgentID) {
		return invalid("spec.agent_id must be 1 to 128 letters, digits, '_' or '-'")
	}
	if !ValidName(s.Role) {
		return invalid("spec.role must be a name of 1 to 128 characters without spaces")
	}
	if err := textField("spec.description", s.Description, MaxTextLen, false); err != nil {
		return err
	}
	if s.ClaimTTLS < 0 || s.ClaimTTLS > MaxClaimTTLS {
		return invalid("spec.claim_ttl_s must be from 1 to %d seconds, or left out for the server's default", MaxClaimTTLS)
	}
	if s.Capacity < 0 || s.Capacity > MaxCapacity {
		return invalid("spec.capacity must be between 0 and %d", MaxCapacity)
	}
	if len(s.Capabilities) > MaxListItems || len(s.Grants) > MaxListItems {
		return invalid("spec.capabilities and spec.grants hold at most %d items", MaxListItems)
	}
	for i, c := range s.Capabilities {
		if !ValidName(c) {
			return invalid("spec.capabilities[%d] %q must be a name of 1 to 128 characters without spaces", i, c)
		}
	}
	for i, g := range s.Grants {
		if !knownGrant(g) {
			return invalid("spec.grants[%d] %q is not a known grant (known grants: %v)", i, g, Grants)
		}
	}
	if err := objectField("spec.public_metadata", s.PublicMetadata, MaxMetadataBytes); err != nil {
		return err
	}
	return nil
}
