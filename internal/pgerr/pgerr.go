// Package pgerr reads PostgreSQL's errors for the lease packages: by
// SQLSTATE, through errors.As on *pgconn.PgError, never by their text.
package pgerr

import (
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"
)

// SQLSTATEs leasewrap treats specially.
const (
	CodeReadOnly        = "25006" // read_only_sql_transaction
	CodeUndefinedTable  = "42P01"
	CodeUndefinedColumn = "42703"
	CodeNoPrivilege     = "42501" // insufficient_privilege
	CodeUniqueViolation = "23505"
	CodeAdminShutdown   = "57P01"
	// CodeCrashShutdown: the server ends sessions after a backend crashed.
	CodeCrashShutdown = "57P02"
	// CodeCannotConnectNow: the server is starting up, shutting down or
	// in recovery without hot standby.
	CodeCannotConnectNow = "57P03"
	// CodeTooManyConnections: max_connections (or a role's or database's
	// connection limit) is reached.
	CodeTooManyConnections = "53300"
	// CodeInvalidPassword and CodeInvalidAuthorization: authentication
	// failed, or pg_hba.conf has no entry for the connection.
	CodeInvalidPassword      = "28P01"
	CodeInvalidAuthorization = "28000"
	// CodeInvalidCatalogName: the database named does not exist.
	CodeInvalidCatalogName = "3D000"
	// ClassAccessRule (syntax error or access rule violation) holds what a
	// table of the wrong shape makes the take fail with: undefined_table,
	// undefined_column (42703), undefined_function (42883),
	// datatype_mismatch (42804), wrong_object_type (42809),
	// invalid_column_reference (42P10: no unique index ON CONFLICT can use),
	// and undefined_object (42704), which the shape checks raise.
	ClassAccessRule = "42"
	// CodeNotNull: a NOT NULL column the INSERT does not fill.
	CodeNotNull = "23502"
	// CodeNotInPrerequisiteState: among others, a deferrable unique
	// constraint that ON CONFLICT cannot use as its arbiter.
	CodeNotInPrerequisiteState = "55000"
)

var (
	// ErrReadOnly is added to the server's refusal of a write (see lease.ErrReadOnly).
	ErrReadOnly = errors.New("the database is read-only (a standby, or default_transaction_read_only is on): point the connection string at the primary, for example with target_session_attrs=read-write")
	// ErrPermission is added to a missing privilege (see lease.ErrPermission).
	// The server's error that follows names the table at fault; this says
	// what each of leasewrap's tables needs.
	ErrPermission = errors.New("the role lacks a privilege: run leasewrap migrate once as the tables' owner, then GRANT SELECT, INSERT, UPDATE ON the lease table, " +
		"SELECT, INSERT, DELETE ON its history table (<table>_history) and, with --schedule, SELECT, INSERT, UPDATE, DELETE ON its claims table (<table>_schedule), " +
		"and USAGE ON SCHEMA for a schema.table, to the role leasewrap runs as")
)

// SQLState returns the SQLSTATE of the server error in err's chain, or "".
func SQLState(err error) string {
	if e := server(err); e != nil {
		return e.Code
	}
	return ""
}

// Classify adds ErrReadOnly to the server's read-only refusal, and to pgx's
// when target_session_attrs=read-write found no primary, and ErrPermission
// to a missing privilege, keeping the original error in the chain.
func Classify(err error) error {
	if err == nil || errors.Is(err, ErrReadOnly) || errors.Is(err, ErrPermission) {
		return err
	}
	switch {
	case ReadOnly(err):
		return fmt.Errorf("%w: %w", ErrReadOnly, err)
	case SQLState(err) == CodeNoPrivilege:
		return fmt.Errorf("%w: %w", ErrPermission, err)
	}
	return err
}

// ReadOnly reports whether err is a refusal because the server takes no
// writes (classified or not): the server's own, or pgx's when
// target_session_attrs=read-write found no primary.
func ReadOnly(err error) bool {
	return errors.Is(err, ErrReadOnly) || SQLState(err) == CodeReadOnly || errors.Is(err, pgconn.ErrReadOnlyConnection)
}

// server returns the server error in err's chain, or nil.
func server(err error) *pgconn.PgError {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr
	}
	return nil
}

// UniqueViolationOn reports whether err is a unique violation on the table
// named table (unqualified, as the server reports it).
func UniqueViolationOn(err error, table string) bool {
	e := server(err)
	return e != nil && e.Code == CodeUniqueViolation && e.TableName == table
}

// NotNullColumn returns the column of a not-null violation in err's chain:
// ok is false for any other error.
func NotNullColumn(err error) (column string, ok bool) {
	if e := server(err); e != nil && e.Code == CodeNotNull {
		return e.ColumnName, true
	}
	return "", false
}
