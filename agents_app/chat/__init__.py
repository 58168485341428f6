"""The chat: a signed-in person's WebSocket and the whole path of a turn through it.

``consumers`` is the socket; ``sockets`` its life (who may open it, frames dispatched, the
close when the sign-in ends); ``protocol`` the frames; ``turn_driver`` sees one message's turn
through under its claim (``turn_claims``), ``turns`` streams it, ``edits`` rewinds for an edit
or a regenerate; ``turn_sweep`` ends the turns whose process died. The agent runtime the turn
runs is ``agents_app.runtime``; the service API for agents is ``agents_app.service_api``.
"""
