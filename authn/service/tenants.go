package service

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/turnledger/turnledger/authn"
)

// TenantOp is one change or reading of the tenant allowlist, as `turnledger
// tenants` asks for it.
type TenantOp struct {
	Command     string // add, suspend, activate, delete or list
	IDPTenantID string // add: the tenant claim to allowlist
	Plan        string // add: the plan name
	Ref         string // suspend, activate, delete: the tenant id or idp tenant id
	JSON        bool   // list: a JSON array instead of a table
}

// AdministerTenants carries op out on store at now and prints the result to
// out: the tenant added or changed, or the list.
func AdministerTenants(ctx context.Context, store TenantAdmin, op TenantOp, now time.Time, out io.Writer) error {
	switch op.Command {
	case "add":
		t, err := store.AddTenant(ctx, op.IDPTenantID, op.Plan, now)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "added tenant %s (idp_tenant_id %s, plan %s, status %s)\n", t.ID, t.IDPTenantID, t.Plan, t.Status)
	case "suspend", "activate", "delete":
		status := map[string]string{"suspend": authn.StatusSuspended, "activate": authn.StatusActive, "delete": authn.StatusDeleted}[op.Command]
		t, err := store.SetTenantStatus(ctx, op.Ref, status, now)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "tenant %s (idp_tenant_id %s) is %s\n", t.ID, t.IDPTenantID, t.Status)
	case "list":
		ts, err := store.Tenants(ctx)
		if err != nil {
			return err
		}
		if op.JSON {
			if ts == nil {
				ts = []authn.Tenant{}
			}
			enc := json.NewEncoder(out)
			enc.SetIndent("", "  ")
			return enc.Encode(ts)
		}
		tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tIDP_TENANT_ID\tSTATUS\tPLAN\tCREATED_AT")
		for _, t := range ts {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", t.ID, t.IDPTenantID, t.Status, t.Plan, t.CreatedAt.Format(time.RFC3339))
		}
		return tw.Flush()
	default:
		return fmt.Errorf("unknown tenants command %q", op.Command)
	}
	return nil
}
