-- The example team's migration: an order projection and a log of e-mails sent.
CREATE TABLE orders (
    id      text PRIMARY KEY,
    status  text NOT NULL,
    version integer NOT NULL
);
CREATE TABLE order_emails (
    id       bigserial PRIMARY KEY,
    event_id text NOT NULL,
    order_id text NOT NULL,
    status   text NOT NULL,
    sent_at  timestamptz NOT NULL DEFAULT now()
);
