package monitor

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestCheckEvaluate(t *testing.T) {
	rows := func(vals ...any) Result {
		r := Result{Columns: []string{"v"}}
		for _, v := range vals {
			r.Rows = append(r.Rows, map[string]any{"v": v})
		}
		r.RowCount = len(vals)
		return r
	}
	rng := func(min, max *float64) Check { return Check{Kind: CheckValueRange, Column: "v", Min: min, Max: max} }
	for _, tc := range []struct {
		check Check
		res   Result
		qerr  error
		want  Verdict
	}{
		{rowCount(">", 0), rows(), nil, Verdict{true, "row count 0, fails when > 0"}},
		{rowCount(">", 0), rows(1), nil, Verdict{false, "row count 1 > 0"}},
		{rowCount("<", 2), rows(1), nil, Verdict{false, "row count 1 < 2"}},
		{rowCount(">=", 2), rows(1), nil, Verdict{true, "row count 1, fails when >= 2"}},
		{rowCount("==", 0), rows(), nil, Verdict{false, "row count 0 == 0"}},
		{rowCount("!=", 1), rows(1), nil, Verdict{true, "row count 1, fails when != 1"}},
		{rowCount("<=", 1.5), rows(1, 2), nil, Verdict{true, "row count 2, fails when <= 1.5"}},
		{rowCount(">", 0), Result{}, errors.New("boom"), Verdict{false, "query failed: boom"}},
		{rng(ptr(0.0), ptr(10.0)), rows(int64(0), 10.0, "5"), nil, Verdict{true, "v within range in 3 rows"}},
		{rng(ptr(0.0), nil), rows(int64(3), -0.5), nil, Verdict{false, "row 2: v = -0.5 is below the minimum 0"}},
		{rng(nil, ptr(10.0)), rows(int64(11)), nil, Verdict{false, "row 1: v = 11 is above the maximum 10"}},
		{rng(nil, ptr(10.0)), rows(), nil, Verdict{false, "no rows: value_range needs at least one"}},
		{rng(nil, ptr(10.0)), rows(nil), nil, Verdict{false, "row 1: v = <nil> is not a number"}},
		{rng(nil, ptr(10.0)), rows("ten"), nil, Verdict{false, "row 1: v = ten is not a number"}},
		{rng(nil, ptr(10.0)), Result{Rows: []map[string]any{{"w": 1}}, RowCount: 1}, nil, Verdict{false, `row 1 has no column "v"`}},
		{Check{Kind: CheckQueryFails}, rows(), nil, Verdict{true, "query succeeded"}},
		{Check{Kind: CheckQueryFails}, Result{}, errors.New("timed out after 1s"), Verdict{false, "query failed: timed out after 1s"}},
	} {
		if diff := cmp.Diff(tc.want, tc.check.Evaluate(tc.res, tc.qerr)); diff != "" {
			t.Errorf("%+v.Evaluate(%v rows, %v) (-want +got):\n%s", tc.check, tc.res.RowCount, tc.qerr, diff)
		}
	}
}
