package monitor

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"math/big"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// Connection kinds.
const (
	KindPostgres   = "postgres"
	KindTurnledger = "turnledger"
)

// source runs queries of one connection.
type source interface {
	run(ctx context.Context, query string) (Result, error)
	test(ctx context.Context) (details map[string]any, err error)
	info() map[string]any
}

// postgresSource opens a connection per run and runs the query in a
// read-only transaction that it rolls back: a monitor looks, never writes.
type postgresSource struct {
	cfg  *pgx.ConnConfig
	conf ConnectionConfig
}

func newPostgresSource(cc ConnectionConfig, secrets map[string]string) (*postgresSource, error) {
	cfg, err := pgx.ParseConfig(cc.DSN)
	if err != nil {
		return nil, fmt.Errorf("connection %q: dsn does not parse", cc.ID)
	}
	if cc.PasswordEnv != "" {
		cfg.Password = secrets[cc.PasswordEnv]
	}
	return &postgresSource{cfg: cfg, conf: cc}, nil
}

func (s *postgresSource) info() map[string]any {
	return map[string]any{
		"host": s.cfg.Host, "port": s.cfg.Port, "database": s.cfg.Database, "user": s.cfg.User,
		"password_env": s.conf.PasswordEnv,
	}
}

func (s *postgresSource) connect(ctx context.Context) (*pgx.Conn, error) {
	c, err := pgx.ConnectConfig(ctx, s.cfg.Copy())
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	return c, nil
}

func (s *postgresSource) test(ctx context.Context) (map[string]any, error) {
	c, err := s.connect(ctx)
	if err != nil {
		return nil, err
	}
	defer c.Close(context.Background())
	if err := c.Ping(ctx); err != nil {
		return nil, fmt.Errorf("ping: %w", err)
	}
	return map[string]any{"server_version": c.PgConn().ParameterStatus("server_version")}, nil
}

func (s *postgresSource) run(ctx context.Context, query string) (Result, error) {
	c, err := s.connect(ctx)
	if err != nil {
		return Result{}, err
	}
	defer c.Close(context.Background())
	tx, err := c.BeginTx(ctx, pgx.TxOptions{AccessMode: pgx.ReadOnly})
	if err != nil {
		return Result{}, fmt.Errorf("begin read-only transaction: %w", err)
	}
	defer tx.Rollback(context.Background())
	rows, err := tx.Query(ctx, query)
	if err != nil {
		return Result{}, err
	}
	defer rows.Close()
	res := Result{Columns: []string{}, Rows: []map[string]any{}}
	for _, f := range rows.FieldDescriptions() {
		res.Columns = append(res.Columns, f.Name)
	}
	for rows.Next() {
		res.RowCount++
		if len(res.Rows) >= MaxRows {
			res.Truncated = true
			continue
		}
		vals, err := rows.Values()
		if err != nil {
			return Result{}, err
		}
		row := make(map[string]any, len(vals))
		for i, v := range vals {
			row[res.Columns[i]] = jsonValue(v)
		}
		res.Rows = append(res.Rows, row)
	}
	if err := rows.Err(); err != nil {
		return Result{}, err
	}
	return res, nil
}

// jsonValue turns a value pgx decoded into one that encodes as plain JSON:
// numbers stay numbers (int64 or float64), times are RFC 3339 strings,
// UUIDs their text form, bytes text when UTF-8 else base64.
func jsonValue(v any) any {
	switch x := v.(type) {
	case nil, bool, string, float64, int64:
		return x
	case int16:
		return int64(x)
	case int32:
		return int64(x)
	case int8:
		return int64(x)
	case int:
		return int64(x)
	case float32:
		return float64(x)
	case time.Time:
		return x.UTC().Format(time.RFC3339Nano)
	case []byte:
		if utf8.Valid(x) {
			return string(x)
		}
		return base64.StdEncoding.EncodeToString(x)
	case [16]byte:
		h := hex.EncodeToString(x[:])
		return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
	case pgtype.Numeric:
		if !x.Valid {
			return nil
		}
		if x.NaN || x.InfinityModifier != pgtype.Finite {
			return numericText(x)
		}
		if x.Exp >= 0 && x.Int.BitLen() < 53 {
			i := new(big.Int).Mul(x.Int, new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(x.Exp)), nil))
			if i.IsInt64() {
				return i.Int64()
			}
		}
		f, err := x.Float64Value()
		if err != nil || !f.Valid {
			return numericText(x)
		}
		return f.Float64
	case map[string]any, []any:
		return x
	case fmt.Stringer:
		return x.String()
	default:
		return fmt.Sprint(x)
	}
}

func numericText(n pgtype.Numeric) string {
	b, err := n.MarshalJSON()
	if err != nil {
		return "NaN"
	}
	s, err := strconv.Unquote(string(b))
	if err != nil {
		return string(b)
	}
	return s
}
