"""HTTP access for the providers, one concern per module.

* :mod:`~ollm_lite.http.transport`: :class:`~ollm_lite.http.transport.Transport`, the session
  and the retry loop: what providers use.
* :mod:`~ollm_lite.http.send`: one try of a request (send, watch, map the answer).
* :mod:`~ollm_lite.http.response`: :class:`~ollm_lite.http.response.StreamResponse`, an open
  answer read chunk by chunk, and the bounded ``Content-Encoding`` inflater.
* :mod:`~ollm_lite.http.policy`: :class:`~ollm_lite.http.policy.Timeouts`,
  :class:`~ollm_lite.http.policy.RetryPolicy` and the size limits.
* :mod:`~ollm_lite.http.cancel`: how a request is interrupted from another thread (one watcher
  thread per transport).
* :mod:`~ollm_lite.http.urllib3_hooks`: the only code that relies on urllib3's internals.
* :mod:`~ollm_lite.http.errors`: an HTTP error answer as an exception (status mapping).
* :mod:`~ollm_lite.http.failures`: a failed send or read (refused, timed out, reset,
  cancelled) as an exception.
* :mod:`~ollm_lite.http.urls`: the one base-URL parser.
* :mod:`~ollm_lite.http.secrets`: the one redactor and the check that a key can be sent.

Importing this package (or ``urls``, ``secrets``, ``errors``, ``policy``) imports no HTTP
library: configuration and the CLI's ``--help`` use them without paying for ``requests``.
"""
