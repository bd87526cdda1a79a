package monitor

import (
	"errors"
	"fmt"
	"math"
	"strconv"
)

// Check kinds.
const (
	CheckRowCount   = "row_count"
	CheckValueRange = "value_range"
	CheckQueryFails = "query_fails"
)

// Check decides whether a run's result is a failure. Every kind fails when
// the query itself fails (cannot connect, SQL error, timeout).
//
//   - row_count {op, value}: fails when "row count <op> value" holds, so
//     {"kind":"row_count","op":">","value":0} fails when any row comes back.
//   - value_range {column, min, max}: fails when the column of any row is
//     not a number in [min, max] (either bound may be left out), or when no
//     row comes back.
//   - query_fails: fails only when the query fails.
type Check struct {
	Kind   string   `json:"kind"`
	Op     string   `json:"op,omitempty"`
	Value  *float64 `json:"value,omitempty"`
	Column string   `json:"column,omitempty"`
	Min    *float64 `json:"min,omitempty"`
	Max    *float64 `json:"max,omitempty"`
}

var ops = map[string]func(a, b float64) bool{
	">":  func(a, b float64) bool { return a > b },
	">=": func(a, b float64) bool { return a >= b },
	"<":  func(a, b float64) bool { return a < b },
	"<=": func(a, b float64) bool { return a <= b },
	"==": func(a, b float64) bool { return a == b },
	"!=": func(a, b float64) bool { return a != b },
}

func (c Check) validate() error {
	switch c.Kind {
	case CheckRowCount:
		if ops[c.Op] == nil {
			return fmt.Errorf("op %q must be one of >, >=, <, <=, ==, !=", c.Op)
		}
		if c.Value == nil {
			return errors.New("row_count needs a value")
		}
		if c.Column != "" || c.Min != nil || c.Max != nil {
			return errors.New("row_count takes only op and value")
		}
	case CheckValueRange:
		if c.Column == "" {
			return errors.New("value_range needs a column")
		}
		if c.Min == nil && c.Max == nil {
			return errors.New("value_range needs min, max or both")
		}
		if c.Min != nil && c.Max != nil && *c.Min > *c.Max {
			return errors.New("value_range min is above max")
		}
		if c.Op != "" || c.Value != nil {
			return errors.New("value_range takes only column, min and max")
		}
	case CheckQueryFails:
		if c.Op != "" || c.Value != nil || c.Column != "" || c.Min != nil || c.Max != nil {
			return errors.New("query_fails takes no other fields")
		}
	default:
		return fmt.Errorf("kind %q must be %s, %s or %s", c.Kind, CheckRowCount, CheckValueRange, CheckQueryFails)
	}
	return nil
}

// Verdict is a check's judgement of one run.
type Verdict struct {
	Passed bool   `json:"passed"`
	Reason string `json:"reason"`
}

// Evaluate judges a result, or the error of a query that failed.
func (c Check) Evaluate(res Result, queryErr error) Verdict {
	if queryErr != nil {
		return Verdict{false, "query failed: " + queryErr.Error()}
	}
	switch c.Kind {
	case CheckRowCount:
		n, want := float64(res.RowCount), *c.Value
		if ops[c.Op](n, want) {
			return Verdict{false, fmt.Sprintf("row count %d %s %s", res.RowCount, c.Op, num(want))}
		}
		return Verdict{true, fmt.Sprintf("row count %d, fails when %s %s", res.RowCount, c.Op, num(want))}
	case CheckValueRange:
		if len(res.Rows) == 0 {
			return Verdict{false, "no rows: value_range needs at least one"}
		}
		for i, row := range res.Rows {
			v, present := row[c.Column]
			if !present {
				return Verdict{false, fmt.Sprintf("row %d has no column %q", i+1, c.Column)}
			}
			f, ok := toFloat(v)
			if !ok {
				return Verdict{false, fmt.Sprintf("row %d: %s = %v is not a number", i+1, c.Column, v)}
			}
			if c.Min != nil && f < *c.Min {
				return Verdict{false, fmt.Sprintf("row %d: %s = %s is below the minimum %s", i+1, c.Column, num(f), num(*c.Min))}
			}
			if c.Max != nil && f > *c.Max {
				return Verdict{false, fmt.Sprintf("row %d: %s = %s is above the maximum %s", i+1, c.Column, num(f), num(*c.Max))}
			}
		}
		return Verdict{true, fmt.Sprintf("%s within range in %d rows", c.Column, len(res.Rows))}
	default: // query_fails
		return Verdict{true, "query succeeded"}
	}
}

func num(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

func toFloat(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, !math.IsNaN(x)
	case int64:
		return float64(x), true
	case int:
		return float64(x), true
	case string:
		f, err := strconv.ParseFloat(x, 64)
		return f, err == nil && !math.IsNaN(f)
	}
	return 0, false
}

// Result is what a query returned: its columns and rows, each row a map from
// column name to a JSON value. Sources keep at most MaxRows rows for the
// check; RowCount counts them all.
type Result struct {
	Columns   []string         `json:"columns"`
	Rows      []map[string]any `json:"rows"`
	RowCount  int              `json:"row_count"`
	Truncated bool             `json:"truncated"`
}

// MaxRows is the number of rows a run keeps for its check.
const MaxRows = 10000

// ShownRows is the number of rows a run's response shows.
const ShownRows = 50

func (r Result) shown() Result {
	if len(r.Rows) > ShownRows {
		r.Rows = r.Rows[:ShownRows]
		r.Truncated = true
	}
	if r.Rows == nil {
		r.Rows = []map[string]any{}
	}
	if r.Columns == nil {
		r.Columns = []string{}
	}
	return r
}
