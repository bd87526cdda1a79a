package httpapi

import "net/http"

// projectItem is one entry of the admin project list.
type projectItem struct {
	ProjectID string `json:"project_id"`
}

// projectList is the response of GET /admin/v1/projects.
type projectList struct {
	Items       []projectItem `json:"items"`
	Diagnostics []Diagnostic  `json:"diagnostics"`
}

// listProjects answers GET /admin/v1/projects (admin only): every project
// that has an event in the projections, in byte order of its id. A project
// whose first event the projections have not folded yet is not listed; the
// diagnostics say when they lag.
func (s *Server) listProjects(w http.ResponseWriter, c *call) error {
	if _, err := s.query(c); err != nil {
		return err
	}
	ids, err := s.store.Projects()
	if err != nil {
		return err
	}
	out := projectList{Items: make([]projectItem, 0, len(ids)), Diagnostics: []Diagnostic{}}
	for _, id := range ids {
		out.Items = append(out.Items, projectItem{ProjectID: id})
	}
	if s.cfg.Diagnostics != nil {
		out.Diagnostics = append(out.Diagnostics, s.cfg.Diagnostics(c.ctx)...)
	}
	return s.ok(w, out)
}
