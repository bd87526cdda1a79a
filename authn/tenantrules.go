package authn

import (
	"errors"
	"fmt"
	"regexp"
)

// ErrTransition is a tenant status change that is not allowed.
var ErrTransition = errors.New("status change not allowed")

// planPattern: allowed plan names (the spec leaves the values open).
var planPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,31}$`)

// CheckNewTenant reports whether a tenant may be added with these values; the
// stores call it so that the rule has one home.
func CheckNewTenant(idpTenantID, plan string) error {
	if !validTenantClaim(idpTenantID) {
		return fmt.Errorf("idp tenant id %q must be 1 to 64 letters, digits or inner hyphens", idpTenantID)
	}
	if !planPattern.MatchString(plan) {
		return fmt.Errorf("plan %q must be 1 to 32 lower-case letters, digits, '-' or '_'", plan)
	}
	return nil
}

// CheckTransition reports whether a tenant of status from may move to to:
// active ⇄ suspended, active or suspended → deleted; deleted is final. The
// caller treats from == to as a no-op before asking.
func CheckTransition(id, from, to string) error {
	if from == StatusDeleted || (to != StatusActive && to != StatusSuspended && to != StatusDeleted) {
		return fmt.Errorf("tenant %s is %s and cannot become %s: %w", id, from, to, ErrTransition)
	}
	return nil
}
