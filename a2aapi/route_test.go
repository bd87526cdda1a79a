package a2aapi

import "testing"

func TestRouteOfHidesTaskIDs(t *testing.T) {
	for rest, want := range map[string]string{
		"":                                      "",
		"/.well-known/agent-card.json":          "/.well-known/agent-card.json",
		"/message:send":                         "/message:send",
		"/tasks":                                "/tasks",
		"/tasks/turn_1":                         "/tasks/{task_id}",
		"/tasks/turn_1:cancel":                  "/tasks/{task_id}:cancel",
		"/tasks/turn_1/pushNotificationConfigs": "/tasks/{task_id}/pushNotificationConfigs",
	} {
		if got := routeOf(rest); got != want {
			t.Errorf("routeOf(%q) = %q, want %q", rest, got, want)
		}
	}
}
