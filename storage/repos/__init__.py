"""Narrow async repositories, one per aggregate; every user-data query takes a user id."""
