"""Actors: how ``trawl run`` runs a task's work in processes of its own.

``spec`` is the declaration (``trawl.Actor``) and the spawn policy, ``handle`` the
orchestrator's handle on a running actor process, ``main`` the actor process's entry point,
``hooks`` firing an actor's plugin hooks from its worker."""
