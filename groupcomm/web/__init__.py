"""``groupcomm web``: the IM and the shared editor in browsers, each tab a member of the
session, served by a gateway that joins the session server like any client."""
