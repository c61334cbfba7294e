package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/htqueue/htq/internal/apiclient"
	"github.com/htqueue/htq/internal/apitoken"
	"github.com/htqueue/htq/internal/embedded"
	"github.com/htqueue/htq/internal/storage"
	"github.com/spf13/cobra"
)

func newTokenCmd(r *remote) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "token",
		Short: "Show or rotate the API token htq serve keeps with its data",
		Long: `token reads and rotates the API token that htq serve generated and stored
with its data (when it was not given --token or HTQ_TOKEN), so a lost token
is never a dead end. It works on the storage htq serve uses: --broker, else
htq serve's own setting (HTQ_STORAGE, the HTQ_CONFIG file, file:./htq-data).

Redis, or an embedded data directory no process holds: htq reads and writes
the token records directly; every running htq serve on that Redis sees a
rotation at the new token's first use. An embedded directory held by a
running htq serve: htq reads the token file htq serve keeps in it
(DIR/token, mode 0600), and a rotation asks that htq serve (--server) with
that token. Reading either needs the rights to read the data.`,
		Example: "  htq token show\n  htq token rotate --grace 1h\n  htq token show --broker redis://10.0.0.5:6379/0",
	}
	makeGroup(cmd)
	cmd.PersistentFlags().StringVar(&r.storage, "storage", "", "htq serve's storage URL (default: htq serve's own setting, HTQ_STORAGE or the HTQ_CONFIG file, else file:./htq-data)")
	cmd.AddCommand(newTokenShowCmd(r), newTokenRotateCmd(r))
	return cmd
}

// tokenReport is what token show and rotate print with --json.
type tokenReport struct {
	Token string `json:"token"`
	// Grace lists the earlier tokens still accepted (when read from the
	// storage).
	Grace []apitoken.Grace `json:"grace,omitempty"`
	// PreviousValidUntil is, after a rotation, when the replaced token
	// stops being accepted.
	PreviousValidUntil *time.Time `json:"previous_valid_until,omitempty"`
	// Source says where the token was read or rotated.
	Source string `json:"source"`
}

func newTokenShowCmd(r *remote) *cobra.Command {
	return &cobra.Command{
		Use:   "show",
		Short: "Print the API token stored with htq serve's data",
		Long: `show prints the current token on standard output (and nothing else, so
HTQ_TOKEN=$(htq token show) works); --json adds the earlier tokens still
accepted after a rotation.`,
		Example: "  htq token show\n  export HTQ_TOKEN=$(htq token show --broker file:/var/lib/htq)",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if _, _, configured := r.serveConfig(); configured != "" {
				fmt.Fprintln(r.stderr, "htq: note: HTQ_TOKEN or the HTQ_CONFIG file sets a token; an htq serve started with it uses that one, not the stored one")
			}
			storageURL := r.storageURL()
			b, err := openMeta(ctx, storageURL)
			var rep tokenReport
			switch {
			case err == nil:
				defer b.Close()
				set, err := apitoken.Load(ctx, b, time.Now())
				if err != nil {
					return err
				}
				rep = tokenReport{Token: set.Current, Grace: set.Grace, Source: storageName(storageURL)}
			case errors.Is(err, embedded.ErrLocked):
				dir, _ := storage.DataDir(storageURL)
				tok, ferr := tokenFile(dir, err)
				if ferr != nil {
					return ferr
				}
				rep = tokenReport{Token: tok, Source: filepath.Join(dir, apitoken.FileName)}
			default:
				return err
			}
			if r.json {
				return printJSON(r.stdout, rep)
			}
			_, err = fmt.Fprintln(r.stdout, rep.Token)
			return err
		},
	}
}

// tokenFile reads the token file of a data directory that a running htq
// serve holds (locked is the error of the attempt to open it).
func tokenFile(dir string, locked error) (string, error) {
	tok, err := apitoken.ReadFile(dir)
	if err != nil {
		return "", fmt.Errorf("%w, and it has no readable token file (%v): that htq serve was given its token by --token or HTQ_TOKEN; look there", locked, err)
	}
	return tok, nil
}

func newTokenRotateCmd(r *remote) *cobra.Command {
	var grace time.Duration
	cmd := &cobra.Command{
		Use:   "rotate",
		Short: "Replace the stored API token; the old one stays accepted for --grace",
		Long: `rotate makes a new token, prints it, and keeps the old one accepted for
--grace (0: the old token stops at once, for a leaked one). Every htq serve
on the storage accepts the new token at its first use and drops the old one
within 2 seconds of its grace ending. With --server (or HTQ_SERVER) htq asks
that service's API, with the current token; else it rotates in the storage
(see htq token --help). A service given --token or HTQ_TOKEN has no stored
token to rotate: change its setting instead.`,
		Example: "  htq token rotate\n  htq token rotate --grace 0\n  htq token rotate --grace 24h --broker redis://10.0.0.5:6379/0",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if grace < 0 || grace > apitoken.MaxGrace {
				return usagef("--grace %v: want 0 to %v", grace, apitoken.MaxGrace)
			}
			ctx := cmd.Context()
			var rep *tokenReport
			var err error
			if _, explicit := r.serverURL(); explicit {
				tok, _ := r.findToken(ctx)
				rep, err = r.rotateThroughAPI(ctx, tok, grace)
			} else {
				rep, err = r.rotateInStorage(ctx, grace)
			}
			if err != nil {
				return err
			}
			if r.json {
				return printJSON(r.stdout, rep)
			}
			if _, err := fmt.Fprintln(r.stdout, rep.Token); err != nil {
				return err
			}
			if rep.PreviousValidUntil != nil {
				fmt.Fprintf(r.stderr, "htq: the previous token is accepted until %s\n", when(rep.PreviousValidUntil))
			} else {
				fmt.Fprintln(r.stderr, "htq: the previous token is no longer accepted")
			}
			return nil
		},
	}
	cmd.Flags().DurationVar(&grace, "grace", time.Hour, "how long the replaced token stays accepted (0 to 720h)")
	return cmd
}

// rotateInStorage rotates in the storage, or through the running htq serve
// that holds an embedded data directory.
func (r *remote) rotateInStorage(ctx context.Context, grace time.Duration) (*tokenReport, error) {
	storageURL := r.storageURL()
	b, err := openMeta(ctx, storageURL)
	if errors.Is(err, embedded.ErrLocked) {
		dir, _ := storage.DataDir(storageURL)
		tok, ferr := tokenFile(dir, err)
		if ferr != nil {
			return nil, ferr
		}
		rep, err := r.rotateThroughAPI(ctx, tok, grace)
		if errors.Is(err, apiclient.ErrUnreachable) {
			return nil, fmt.Errorf("%s is held by a running htq serve, which must rotate the token, but %w (give its address with --server)", dir, err)
		}
		return rep, err
	}
	if err != nil {
		return nil, err
	}
	defer b.Close()
	set, err := apitoken.Rotate(ctx, b, grace, time.Now())
	if err != nil {
		return nil, err
	}
	if dir, ok := storage.DataDir(storageURL); ok {
		if err := apitoken.WriteFile(dir, set.Current); err != nil {
			return nil, err
		}
	}
	rep := &tokenReport{Token: set.Current, Source: storageName(storageURL)}
	if n := len(set.Grace); n > 0 && grace > 0 {
		rep.PreviousValidUntil = &set.Grace[n-1].Until
	}
	return rep, nil
}

// rotateThroughAPI asks the service to rotate, presenting tok.
func (r *remote) rotateThroughAPI(ctx context.Context, tok string, grace time.Duration) (*tokenReport, error) {
	server, _ := r.serverURL()
	c, err := apiclient.New(server, apiclient.Options{Token: tok})
	if err != nil {
		return nil, usageError{fmt.Errorf("--server: %w", err)}
	}
	defer c.Close()
	out, err := c.RotateToken(ctx, grace)
	if err != nil {
		return nil, err
	}
	return &tokenReport{Token: out.Token, PreviousValidUntil: out.PreviousValidUntil, Source: c.Server()}, nil
}
