package kernel

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
)

// WorkMemoryKind is the constant kind of a work-memory report manifest.
const WorkMemoryKind = "agent_work_memory_report_manifest.v1"

// ParseWorkMemoryReport decodes a work-memory report manifest exactly as the
// contract states it: every listed field present and no others, records
// shaped as {role, payload, source_refs}, and no `meta` key anywhere in the
// manifest — operation metadata is trusted service-side context, never agent
// input.
func ParseWorkMemoryReport(raw []byte) (WorkMemoryReport, error) {
	var r WorkMemoryReport
	if path, ok := findKey(raw, "meta"); ok {
		return r, invalid("the manifest must not contain meta (found at %s)", path)
	}
	if path, ok := unknownManifestField(raw); ok {
		return r, invalid("unknown field %q in the work-memory report manifest", path)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return r, invalid("malformed work-memory report manifest: %v", err)
	}
	var present map[string]json.RawMessage
	if err := json.Unmarshal(raw, &present); err != nil {
		return r, invalid("malformed work-memory report manifest: %v", err)
	}
	for _, k := range manifestFields {
		if _, ok := present[k]; !ok {
			return r, invalid("the manifest lacks %s: every field is required (final_payload may be null)", k)
		}
	}
	return r, nil
}

// manifestFields are the fields of a manifest, every one required.
var manifestFields = []string{"kind", "request_id", "summary", "records", "final_payload", "declared_project_id", "declared_agent_id"}

// recordFields are the fields of a manifest's record.
var recordFields = []string{"role", "payload", "source_refs"}

// unknownManifestField returns the path of a key the contract does not list,
// in the manifest ("extra") or in one of its records ("records[2].weight"),
// the first in sorted order. A manifest not shaped as objects is left to the
// strict decoding that follows.
func unknownManifestField(raw []byte) (string, bool) {
	var top map[string]json.RawMessage
	if json.Unmarshal(raw, &top) != nil {
		return "", false
	}
	if k, ok := unknownKey(top, manifestFields); ok {
		return k, true
	}
	var records []map[string]json.RawMessage
	if json.Unmarshal(top["records"], &records) != nil {
		return "", false
	}
	for i, rec := range records {
		if k, ok := unknownKey(rec, recordFields); ok {
			return "records[" + strconv.Itoa(i) + "]." + k, true
		}
	}
	return "", false
}

func unknownKey(obj map[string]json.RawMessage, known []string) (string, bool) {
	var unknown []string
	for k := range obj {
		if !slices.Contains(known, k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) == 0 {
		return "", false
	}
	return slices.Min(unknown), true
}

// checkReport enforces the manifest's rules against the caller.
func checkReport(r WorkMemoryReport, project, agent string) error {
	switch {
	case r.Kind != WorkMemoryKind:
		return invalid("kind must be %q", WorkMemoryKind)
	case r.DeclaredProjectID != project:
		return Errorf(Forbidden, "declared_project_id %q is not the project %s", r.DeclaredProjectID, project)
	case r.DeclaredAgentID != agent:
		return Errorf(Forbidden, "declared_agent_id %q is not the calling agent %s", r.DeclaredAgentID, agent)
	case !keyPattern.MatchString(r.RequestID):
		return invalid("request_id must be 1 to 200 printable characters without spaces")
	case len(r.Records) > MaxReportRecords:
		return invalid("a report holds at most %d records", MaxReportRecords)
	}
	if err := textField("summary", r.Summary, MaxTextLen*10, false); err != nil {
		return err
	}
	if r.Records == nil {
		return invalid("records is required (an array)")
	}
	for i, rec := range r.Records {
		if !ValidName(rec.Role) {
			return invalid("records[%d].role must be a name of 1 to 128 characters without spaces", i)
		}
		if !isObject(rec.Payload) {
			return invalid("records[%d].payload must be a JSON object", i)
		}
		if rec.SourceRefs == nil {
			return invalid("records[%d].source_refs is required (an array)", i)
		}
	}
	if !IsNull(r.FinalPayload) && !isObject(r.FinalPayload) {
		return invalid("final_payload must be a JSON object or null")
	}
	return nil
}

// findKey reports whether any object in the JSON text has the key, and the
// JSON pointer of the first one found.
func findKey(raw []byte, key string) (string, bool) {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return "", false
	}
	return search(v, "", key)
}

func search(v any, path, key string) (string, bool) {
	switch v := v.(type) {
	case map[string]any:
		if _, ok := v[key]; ok {
			return path + "/" + key, true
		}
		for k, child := range v {
			if p, ok := search(child, path+"/"+k, key); ok {
				return p, true
			}
		}
	case []any:
		for i, child := range v {
			if p, ok := search(child, path+"/"+strconv.Itoa(i), key); ok {
				return p, true
			}
		}
	}
	return "", false
}

// WorkMemoryReport is the work-memory report manifest of the spec.
type WorkMemoryReport struct {
	Kind              string             `json:"kind"`
	RequestID         string             `json:"request_id"`
	Summary           string             `json:"summary"`
	Records           []WorkMemoryRecord `json:"records"`
	FinalPayload      json.RawMessage    `json:"final_payload"`
	DeclaredProjectID string             `json:"declared_project_id"`
	DeclaredAgentID   string             `json:"declared_agent_id"`
}

// WorkMemoryRecord is one record of a work-memory report.
type WorkMemoryRecord struct {
	Role       string          `json:"role"`
	Payload    json.RawMessage `json:"payload"`
	SourceRefs []any           `json:"source_refs"`
}
