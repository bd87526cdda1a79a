package authn

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"time"

	"github.com/julienschmidt/httprouter"
	"github.com/turnledger/turnledger/internal/jsonhttp"
)

// providerPattern is a provider name in a profile route.
var providerPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,31}$`)

// profileInput is the body of PUT /api/v1/provider-profiles/{provider}.
// APIKey is write-only: an absent api_key keeps the stored one, an empty
// string removes it.
type profileInput struct {
	BaseURL string  `json:"base_url"`
	Model   string  `json:"model"`
	APIKey  *string `json:"api_key"`
}

// ProfileView is how a profile is shown: never the key, only whether one is
// stored and, for keys of 16 characters or more, its last four.
type ProfileView struct {
	Provider   string    `json:"provider"`
	BaseURL    string    `json:"base_url,omitempty"`
	Model      string    `json:"model,omitempty"`
	HasAPIKey  bool      `json:"has_api_key"`
	APIKeyHint string    `json:"api_key_hint,omitempty"`
	UpdatedAt  time.Time `json:"updated_at"`
}

func viewOf(p Profile) ProfileView {
	return ProfileView{Provider: p.Provider, BaseURL: p.BaseURL, Model: p.Model, HasAPIKey: len(p.APIKeyCiphertext) > 0, APIKeyHint: p.APIKeyHint, UpdatedAt: p.UpdatedAt}
}

// sealer encrypts profile secrets with AES-256-GCM. The additional data binds
// a ciphertext to its tenant, user and provider, so a row copied elsewhere
// does not decrypt.
type sealer struct {
	aead cipher.AEAD
	rand io.Reader
}

func newSealer(b64 string, rnd io.Reader) (*sealer, error) {
	key, err := decodeKey(b64)
	if err != nil {
		return nil, fmt.Errorf("SECRET_ENCRYPTION_KEY %w", err)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &sealer{aead: aead, rand: rnd}, nil
}

func aad(tenantID, userID, provider string) []byte {
	return []byte("turnledger-profile\x00" + tenantID + "\x00" + userID + "\x00" + provider)
}

func (s *sealer) seal(plain []byte, ad []byte) ([]byte, error) {
	nonce := make([]byte, s.aead.NonceSize(), s.aead.NonceSize()+len(plain)+s.aead.Overhead())
	if _, err := io.ReadFull(s.rand, nonce); err != nil {
		return nil, fmt.Errorf("draw nonce: %w", err)
	}
	return s.aead.Seal(nonce, nonce, plain, ad), nil
}

func (s *sealer) open(ct []byte, ad []byte) ([]byte, error) {
	n := s.aead.NonceSize()
	if len(ct) < n {
		return nil, errors.New("ciphertext too short")
	}
	return s.aead.Open(nil, ct[:n], ct[n:], ad)
}

// profileScope checks the mode and returns the caller's principal.
func (s *Server) profileScope(ctx context.Context) (Principal, error) {
	p, ok := PrincipalFrom(ctx)
	if !ok {
		return Principal{}, errf(KindUnauthorized, "missing authentication")
	}
	if s.sealer == nil {
		return Principal{}, errf(KindUnavailable, "provider profiles are not configured (SECRET_ENCRYPTION_KEY is not set)")
	}
	if s.store == nil {
		return Principal{}, errf(KindUnavailable, "the profile database is unavailable")
	}
	return p, nil
}

func providerParam(ps httprouter.Params) (string, error) {
	name := ps.ByName("provider")
	if !providerPattern.MatchString(name) {
		return "", errf(KindInvalid, "provider must be 1 to 32 lower-case letters, digits, '-' or '_', starting with a letter or digit")
	}
	return name, nil
}

func (s *Server) listProfiles(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	p, err := s.profileScope(r.Context())
	if err != nil {
		s.fail(w, err)
		return
	}
	ps, err := s.store.Profiles(r.Context(), p.TenantID, p.UserID)
	if err != nil {
		s.fail(w, err)
		return
	}
	views := make([]ProfileView, 0, len(ps))
	for _, x := range ps {
		views = append(views, viewOf(x))
	}
	jsonhttp.Write(w, http.StatusOK, map[string]any{"profiles": views})
}

func (s *Server) getProfile(w http.ResponseWriter, r *http.Request, params httprouter.Params) {
	p, err := s.profileScope(r.Context())
	if err != nil {
		s.fail(w, err)
		return
	}
	name, err := providerParam(params)
	if err != nil {
		s.fail(w, err)
		return
	}
	x, err := s.store.Profile(r.Context(), p.TenantID, p.UserID, name)
	if errors.Is(err, ErrNotFound) {
		s.fail(w, errf(KindNotFound, "no provider profile "+name))
		return
	}
	if err != nil {
		s.fail(w, err)
		return
	}
	jsonhttp.Write(w, http.StatusOK, viewOf(x))
}

const maxAPIKeyBytes = 4096

func (s *Server) putProfile(w http.ResponseWriter, r *http.Request, params httprouter.Params) {
	p, err := s.profileScope(r.Context())
	if err != nil {
		s.fail(w, err)
		return
	}
	name, err := providerParam(params)
	if err != nil {
		s.fail(w, err)
		return
	}
	var in profileInput
	if err := jsonhttp.Decode(r.Body, 16<<10, &in); err != nil {
		s.fail(w, &Error{Kind: KindInvalid, Message: err.Error()})
		return
	}
	if in.BaseURL != "" {
		if u, err := url.Parse(in.BaseURL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || len(in.BaseURL) > 2048 {
			s.fail(w, errf(KindInvalid, "base_url must be an absolute http or https URL of at most 2048 bytes"))
			return
		}
	}
	if len(in.Model) > 256 {
		s.fail(w, errf(KindInvalid, "model must be at most 256 bytes"))
		return
	}
	old, err := s.store.Profile(r.Context(), p.TenantID, p.UserID, name)
	if err != nil && !errors.Is(err, ErrNotFound) {
		s.fail(w, err)
		return
	}
	x := Profile{Provider: name, BaseURL: in.BaseURL, Model: in.Model, APIKeyCiphertext: old.APIKeyCiphertext, APIKeyHint: old.APIKeyHint, UpdatedAt: s.now().UTC()}
	if in.APIKey != nil {
		key := *in.APIKey
		switch {
		case key == "":
			x.APIKeyCiphertext, x.APIKeyHint = nil, ""
		case len(key) > maxAPIKeyBytes:
			s.fail(w, errf(KindInvalid, fmt.Sprintf("api_key must be at most %d bytes", maxAPIKeyBytes)))
			return
		default:
			ct, err := s.sealer.seal([]byte(key), aad(p.TenantID, p.UserID, name))
			if err != nil {
				s.fail(w, err)
				return
			}
			x.APIKeyCiphertext, x.APIKeyHint = ct, ""
			if len(key) >= 16 {
				x.APIKeyHint = "…" + key[len(key)-4:]
			}
		}
	}
	if err := s.store.PutProfile(r.Context(), p.TenantID, p.UserID, x); err != nil {
		s.fail(w, err)
		return
	}
	jsonhttp.Write(w, http.StatusOK, viewOf(x))
}

func (s *Server) deleteProfile(w http.ResponseWriter, r *http.Request, params httprouter.Params) {
	p, err := s.profileScope(r.Context())
	if err != nil {
		s.fail(w, err)
		return
	}
	name, err := providerParam(params)
	if err != nil {
		s.fail(w, err)
		return
	}
	err = s.store.DeleteProfile(r.Context(), p.TenantID, p.UserID, name)
	if errors.Is(err, ErrNotFound) {
		s.fail(w, errf(KindNotFound, "no provider profile "+name))
		return
	}
	if err != nil {
		s.fail(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// ProfileAPIKey decrypts the stored API key of the caller's profile, for
// the runtime's own use (never for a response).
func (s *Server) ProfileAPIKey(ctx context.Context, provider string) (string, error) {
	p, err := s.profileScope(ctx)
	if err != nil {
		return "", err
	}
	x, err := s.store.Profile(ctx, p.TenantID, p.UserID, provider)
	if err != nil {
		return "", err
	}
	if len(x.APIKeyCiphertext) == 0 {
		return "", ErrNotFound
	}
	plain, err := s.sealer.open(x.APIKeyCiphertext, aad(p.TenantID, p.UserID, provider))
	if err != nil {
		return "", fmt.Errorf("decrypt api key: %w", err)
	}
	return string(plain), nil
}
