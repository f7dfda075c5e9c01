// The pgpass package (node-postgres's reader of ~/.pgpass) ships no types: the one function
// cluster/connection.ts calls. It reads PGPASSFILE or ~/.pgpass, ignores a file others can read,
// and answers undefined when PGPASSWORD is set or no line matches.
declare module 'pgpass' {
  interface PgpassConnection {
    readonly host: string;
    readonly port: number;
    readonly database: string;
    readonly user: string;
  }
  function pgpass(connection: PgpassConnection, callback: (password: string | undefined) => void): void;
  export = pgpass;
}
