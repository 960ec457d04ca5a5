"""Annotator entry points (/a/<study-slug>/) and the researchers' study pages."""
urlpatterns: list = []
